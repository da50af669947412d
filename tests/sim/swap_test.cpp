// Swapping in the simulator (dtr_sim --swap): every byte copied adds its price to the run's
// compute, and --swap-priced lets the pool evict instead when the copies cost more.
#include "sim/read.h"
#include "sim/runs.h"
#include "support/sim_log.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

constexpr std::size_t kMiB = 1 << 20;

std::string call(const std::string& out, const std::string& arg, std::size_t bytes) {
  return testing::log_call("f", out, {arg}, bytes);
}
using testing::log_constant;
using testing::log_release;

RunOptions unit_cost() {
  RunOptions o;
  o.cost = CostModel::Unit;
  o.swap = true;
  o.thrash_limit = 0;  // the copies may well cost more than the calls
  return o;
}

// Two constants of 1 MiB read in turn; a budget of 1.5 MiB holds one of them at a time.
TEST(SimSwap, CopiesAreChargedToTheComputeAtTheirPrice) {
  std::string text = testing::log_start() + log_constant("x", kMiB) + log_constant("y", kMiB);
  for (const char* out : {"a", "b", "c", "d"})
    text += call(out, out[0] % 2 ? "x" : "y", 1024);  // a, c read x; b, d read y
  for (const char* n : {"a", "b", "c", "d", "x", "y"}) text += log_release(n);
  const Program p = parse_program(text, "two-constants.log");
  RunOptions o = unit_cost();
  o.swap_cost_per_byte = 1e-6;
  const Baseline base = baseline(p, o);
  EXPECT_EQ(base.compute, 4);
  o.swap = false;
  EXPECT_EQ(run(p, base, o, parse_budget("1.5MiB")).result.status, ReplayStatus::Infeasible);
  o.swap = true;
  const RunRow r = run(p, base, o, parse_budget("1.5MiB"));
  ASSERT_EQ(r.result.status, ReplayStatus::Ok) << r.result.message;
  EXPECT_EQ(r.result.evictions, 0u);  // nothing here can be recomputed
  EXPECT_GE(r.result.swap_ins, 3u);   // every read after the first brings one back
  EXPECT_EQ(r.result.swap_bytes, (r.result.swap_outs + r.result.swap_ins) * kMiB);
  EXPECT_DOUBLE_EQ(r.result.swap_cost, static_cast<double>(r.result.swap_bytes) * 1e-6);
  EXPECT_DOUBLE_EQ(r.result.compute, 4 + r.result.swap_cost);
  ASSERT_TRUE(r.overhead);
  EXPECT_DOUBLE_EQ(*r.overhead, r.result.compute / 4);
}

// A constant x, an activation a = f(x) that one call rebuilds, then a constant y with room for
// only two of the three (y dies before a is read again): swapping first moves x out; priced far
// above a's one call, a is evicted and rebuilt.
TEST(SimSwap, PricedSwapsLoseToACheapEviction) {
  const std::string text = testing::log_start() + log_constant("x", kMiB) + call("a", "x", kMiB) +
                           log_constant("y", kMiB) + call("b", "y", 1024) + log_release("b") +
                           log_release("y") + call("c", "a", 1024) + log_release("a") +
                           log_release("c") + log_release("x");
  const Program p = parse_program(text, "price.log");
  RunOptions o = unit_cost();
  o.swap_cost_per_byte = 1;  // a MiB's copy costs a million calls
  const Baseline base = baseline(p, o);
  const BudgetSpec budget = parse_budget("2.5MiB");
  const RunRow first = run(p, base, o, budget);
  ASSERT_EQ(first.result.status, ReplayStatus::Ok) << first.result.message;
  EXPECT_GT(first.result.swap_outs, 0u);
  EXPECT_EQ(first.result.evictions, 0u);
  o.swap_priced = true;
  const RunRow priced = run(p, base, o, budget);
  ASSERT_EQ(priced.result.status, ReplayStatus::Ok) << priced.result.message;
  EXPECT_EQ(priced.result.swap_bytes, 0u);
  EXPECT_EQ(priced.result.evictions, 1u);
  EXPECT_EQ(priced.result.rematerializations, 1u);  // c reads a back
  EXPECT_EQ(priced.result.compute, base.compute + 1);
}

}  // namespace
}  // namespace remat::sim
