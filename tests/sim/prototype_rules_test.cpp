// dtr_sim --prototype: the DTR prototype simulator's rules, parsed from text, and a replay under
// all of them (compute clock, exact sizes, full scan, one victim per search) that is
// deterministic and keeps to its budget.
#include "sim/read.h"
#include "sim/runs.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

using testing::throws_with;

TEST(PrototypeRules, ParseAllNoneListsAndAllBut) {
  const auto all = prototype_rules_from("all");
  EXPECT_TRUE(all.exact_sizes && all.full_scan && all.compute_clock && all.keep_stamp_on_remat &&
              all.single_victim && all.keep_released && all.stamp_first);
  const auto none = prototype_rules_from("none");
  EXPECT_FALSE(none.exact_sizes || none.full_scan || none.compute_clock ||
               none.keep_stamp_on_remat || none.single_victim || none.keep_released ||
               none.stamp_first);
  const auto but = prototype_rules_from("all-but:compute-clock");
  EXPECT_FALSE(but.compute_clock);
  EXPECT_TRUE(but.exact_sizes && but.single_victim);
  const auto but_first = prototype_rules_from("all-but:stamp-first");
  EXPECT_FALSE(but_first.stamp_first);
  EXPECT_TRUE(but_first.keep_released && but_first.keep_stamp_on_remat);
  const auto two = prototype_rules_from("keep-stamp,full-scan");
  EXPECT_TRUE(two.keep_stamp_on_remat && two.full_scan);
  EXPECT_FALSE(two.exact_sizes || two.compute_clock || two.single_victim || two.keep_released ||
               two.stamp_first);
  EXPECT_TRUE(throws_with([] { prototype_rules_from("all-but:speed"); }, {"speed", "exact-sizes"}));
  EXPECT_TRUE(throws_with([] { prototype_rules_from("full-scan,,"); }, {"unknown prototype rule"}));
}

// x (constant) -> a -> b -> c, each of 100 bytes; b and c die; d = g(a).  Under 350 bytes c
// evicts a (b is its input), which d rematerializes.
Program chain() {
  std::string text = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"x"}
{"INSTRUCTION":"MEMORY","NAME":"x","MEMORY":"100"}
)";
  const char* prev = "x";
  for (const char* n : {"a", "b", "c"}) {
    text += fmt::format(
        R"({{"INSTRUCTION":"CALL","NAME":"f","ARGS":["{0}"],"RESULT":["{1}"],"TIME":"1000"}})"
        "\n"
        R"({{"INSTRUCTION":"MEMORY","NAME":"{1}","MEMORY":"100"}})"
        "\n"
        R"({{"INSTRUCTION":"ALIAS","NAME":"{1}","ALIAS":"-1"}})"
        "\n",
        prev, n);
    prev = n;
  }
  text += R"({"INSTRUCTION":"RELEASE","NAME":"b"}
{"INSTRUCTION":"RELEASE","NAME":"c"}
{"INSTRUCTION":"CALL","NAME":"g","ARGS":["a"],"RESULT":["d"],"TIME":"1000"}
{"INSTRUCTION":"MEMORY","NAME":"d","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"d","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"a"}
{"INSTRUCTION":"RELEASE","NAME":"d"}
)";
  return parse_program(text, "chain.log");
}

TEST(PrototypeRules, AReplayUnderEveryRule) {
  const Program p = chain();
  ReplayOptions o;
  o.cost = CostModel::Unit;
  o.budget = 350;
  o.prototype = ReplayOptions::PrototypeRules::all();
  const ReplayResult exact = replay(p, o);
  ASSERT_EQ(exact.status, ReplayStatus::Ok) << exact.message;
  EXPECT_LE(exact.peak_bytes, 350u);
  EXPECT_GE(exact.evictions, 1u);
  EXPECT_GE(exact.rematerializations, 1u);
  // Deterministic under every rule.
  const ReplayResult again = replay(p, o);
  EXPECT_EQ(again.compute, exact.compute);
  EXPECT_EQ(again.evictions, exact.evictions);
}

}  // namespace
}  // namespace remat::sim
