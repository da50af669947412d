// A replay's three outcomes on a hand-sized program: ok with the recomputation it needs,
// thrash once compute passes the limit, infeasible when one op's working set cannot fit.
#include "sim/read.h"
#include "sim/runs.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

// x1 -> a1 -> a2 -> a3 -> a4, then g(a4, a1), with x1, a1 and g's output of 1 KiB and a2..a4 of
// 2 KiB: the chain peaks at 6 KiB (x1, a1 and two links); g needs 5 KiB.
Program chain() {
  std::string text = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"x1"}
{"INSTRUCTION":"MEMORY","NAME":"x1","MEMORY":"1024"}
)";
  const char* prev = "x1";
  const char* names[] = {"a1", "a2", "a3", "a4"};
  for (const char* n : names) {
    text += fmt::format(R"({{"INSTRUCTION":"CALL","NAME":"f","ARGS":["{0}"],"RESULT":["{1}"],"TIME":"1000"}})" "\n"
                        R"({{"INSTRUCTION":"MEMORY","NAME":"{1}","MEMORY":"{2}"}})" "\n"
                        R"({{"INSTRUCTION":"ALIAS","NAME":"{1}","ALIAS":"-1"}})" "\n",
                        prev, n, std::string(n) == "a1" ? 1024 : 2048);
    if (std::string(prev) != "x1" && std::string(prev) != "a1")
      text += fmt::format(R"({{"INSTRUCTION":"RELEASE","NAME":"{}"}})" "\n", prev);
    prev = n;
  }
  text += R"({"INSTRUCTION":"CALL","NAME":"g","ARGS":["a4","a1"],"RESULT":["y"],"TIME":"1000"}
{"INSTRUCTION":"MEMORY","NAME":"y","MEMORY":"1024"}
{"INSTRUCTION":"ALIAS","NAME":"y","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"a4"}
{"INSTRUCTION":"RELEASE","NAME":"a1"}
)";
  return parse_program(text, "chain.log");
}

TEST(Status, OkThrashAndInfeasible) {
  const Program p = chain();
  RunOptions o;
  o.cost = CostModel::Unit;
  o.heuristic = Heuristic::Lru;
  const Baseline base = baseline(p, o);
  EXPECT_EQ(base.compute, 5.0);
  EXPECT_EQ(base.peak_bytes, 6u * 1024);

  // With 5 KiB, a1 (the stalest) is evicted when a3 is made and recomputed from x1 for g:
  // 6 executions instead of 5.
  const RunRow ok = run(p, base, o, parse_budget("5KiB"));
  ASSERT_EQ(ok.result.status, ReplayStatus::Ok) << ok.result.message;
  EXPECT_EQ(ok.result.rematerializations, 1u);
  EXPECT_DOUBLE_EQ(*ok.overhead, 6.0 / 5.0);
  EXPECT_LE(ok.result.peak_bytes, 5u * 1024);

  o.thrash_limit = 1.1;  // 5.5 executions at most
  const RunRow thrash = run(p, base, o, parse_budget("5KiB"));
  EXPECT_EQ(thrash.result.status, ReplayStatus::Thrash);
  EXPECT_FALSE(thrash.overhead.has_value());

  // g holds a4, a1 and y beside the constant x1: 5 KiB.
  const RunRow infeasible = run(p, base, o, parse_budget("4KiB"));
  EXPECT_EQ(infeasible.result.status, ReplayStatus::Infeasible);
  EXPECT_NE(infeasible.result.message.find("budget"), std::string::npos) << infeasible.result.message;
}

}  // namespace
}  // namespace remat::sim
