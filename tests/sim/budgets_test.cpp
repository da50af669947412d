// dtr_sim's --budget values: lists, ranges of fractions and of bytes, and clear errors.
#include "sim/budgets.h"

#include "sim/plot.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

using testing::throws_with;

std::vector<double> fractions(const std::vector<BudgetSpec>& v) {
  std::vector<double> out;
  for (const auto& b : v) out.push_back(b.fraction.value_or(-1));
  return out;
}

TEST(Budgets, ListsAndRanges) {
  EXPECT_EQ(fractions(parse_budget_list("0.2,0.3,0.5")), (std::vector<double>{0.2, 0.3, 0.5}));
  const auto range = fractions(parse_budget_list("0.1:1.0:0.1"));
  ASSERT_EQ(range.size(), 10u);
  EXPECT_EQ(range[2], 0.3);  // rounded, not 0.30000000000000004
  EXPECT_EQ(range.back(), 1.0);
  EXPECT_EQ(fractions(parse_budget_list("0.05:0.2:0.05")),
            (std::vector<double>{0.05, 0.1, 0.15, 0.2}));
  const auto bytes = parse_budget_list("1MiB:3MiB:1MiB, 5000");
  ASSERT_EQ(bytes.size(), 4u);
  EXPECT_EQ(*bytes[1].bytes, 2u << 20);
  EXPECT_EQ(*bytes[3].bytes, 5000u);
  EXPECT_TRUE(parse_budget_list("none")[0].none());
}

TEST(Budgets, BadTextIsAnError) {
  EXPECT_TRUE(throws_with([] { parse_budget_list("0.1:0.5"); }, {"0.1:0.5", "lo:hi:step"}));
  EXPECT_TRUE(throws_with([] { parse_budget_list("0.1:1MiB:0.1"); }, {"both ends"}));
  EXPECT_TRUE(throws_with([] { parse_budget_list("0.5:0.1:0.1"); }, {"low end is above"}));
  EXPECT_TRUE(throws_with([] { parse_budget_list("0.2,,0.3"); }, {"empty entry"}));
  EXPECT_TRUE(throws_with([] { parse_budget_list("0.1:1.0:-1"); }, {"step"}));
  EXPECT_TRUE(throws_with([] { parse_budget_list("12 apples"); }, {"apples"}));
  // Sizes no machine has are errors, not 2^63 bytes from an overflowing conversion.
  EXPECT_TRUE(throws_with([] { parse_budget("1e30B"); }, {"1e30B", "more than 1 PiB"}));
  EXPECT_TRUE(
      throws_with([] { parse_budget("99999999999999999999"); }, {"99999999999999999999", "1 PiB"}));
  EXPECT_EQ(*parse_budget("1024TiB").bytes, std::size_t{1} << 50);
  // A step so small that the count of steps is no integer at all.
  EXPECT_TRUE(throws_with([] { parse_budget_list("0.1:1.0:1e-300"); }, {"too many steps"}));
}

TEST(Plot, ScriptDrawsOneLinePerHeuristic) {
  Sweep s;
  s.title = "lstm";
  s.heuristics = {"dtr", "lru"};
  const std::string script = sweep_plot_script(s, "a.csv", "a.png");
  EXPECT_NE(script.find("set terminal pngcairo"), std::string::npos);
  EXPECT_NE(script.find("using 1:2"), std::string::npos);
  EXPECT_NE(script.find("using 1:3"), std::string::npos);
  EXPECT_EQ(script.find("using 1:4"), std::string::npos);
}

}  // namespace
}  // namespace remat::sim
