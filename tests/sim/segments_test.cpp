// The simulator on a GPU's segment allocator (dtr_sim --segments): the budget counts whole
// segments, fragmentation is reported, and when enough bytes are free but in pieces too small
// the pool evicts a cell whose block joins them, not the stalest ones until a segment empties.
#include "core/segment_allocator.h"
#include "sim/read.h"
#include "sim/runs.h"
#include "support/sim_log.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

constexpr std::size_t kKiB = 1024;

std::string call(const std::string& out, const std::string& arg, std::size_t bytes) {
  return testing::log_call("f", out, {arg}, bytes);
}
using testing::log_release;

// One 2 MiB segment: x (512 B), then a, b, c, d of 510 KiB each; b and d die, leaving 1,027.5
// KiB free in two holes of 510 and 517.5 KiB; then y of 1,000 KiB.
Program holes() {
  std::string text = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"x"}
{"INSTRUCTION":"MEMORY","NAME":"x","MEMORY":"512"}
)";
  for (const char* n : {"a", "b", "c", "d"}) text += call(n, "x", 510 * kKiB);
  text += log_release("b") + log_release("d") + call("y", "x", 1000 * kKiB) + log_release("y") +
          log_release("a") + log_release("c");
  return parse_program(text, "holes.log");
}

TEST(Segments, AHoleIsMadeByEvictingANeighbourOfFreeBlocks) {
  const Program p = holes();
  RunOptions o;
  o.cost = CostModel::Unit;
  o.segments = true;
  const Baseline base = baseline(p, o);
  // The budget is the one segment: y must go into a hole joined from free blocks.
  const RunRow r = run(p, base, o, parse_budget("2MiB"));
  ASSERT_EQ(r.result.status, ReplayStatus::Ok) << r.result.message;
  EXPECT_EQ(r.result.evictions, 1u);
  EXPECT_EQ(r.result.fragmentation_evictions, 1u);
  EXPECT_GT(r.result.fragmentation_at_peak_bytes, 0u);
}

TEST(Segments, WithoutSegmentsTheSameBudgetNeedsNoEviction) {
  const Program p = holes();
  RunOptions o;
  o.cost = CostModel::Unit;
  const Baseline base = baseline(p, o);
  const RunRow r = run(p, base, o, parse_budget("2MiB"));
  ASSERT_EQ(r.result.status, ReplayStatus::Ok) << r.result.message;
  EXPECT_EQ(r.result.evictions, 0u);
  EXPECT_EQ(r.result.fragmentation_evictions, 0u);
  EXPECT_EQ(r.result.fragmentation_at_peak_bytes, 0u);  // not measured on the CPU's cache
}

}  // namespace
}  // namespace remat::sim
