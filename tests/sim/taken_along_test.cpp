// After a search's first victim, cells whose own kernel costs less than the search (its draws
// at Pool::kSecondsPerDraw each) are taken along to the headroom, as tiny cells are: one search
// then pays for several victims.  Cells neither tiny nor that cheap get a search each.
#include "sim/read.h"
#include "sim/runs.h"
#include "support/sim_log.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

constexpr std::size_t kCells = 100, kCellBytes = 16384;  // above Pool::kTinyCell

// x (constant); kCells values f(x) of kCellBytes, each `time_ns` long, all held; then one more,
// which finds half its bytes free; then all are released.
Program program(int time_ns) {
  std::string text = testing::log_start() + testing::log_constant("x", 1024);
  for (std::size_t i = 0; i < kCells; ++i)
    text += testing::log_call("f", fmt::format("c{}", i), {"x"}, kCellBytes, time_ns);
  text += testing::log_call("f", "y", {"x"}, kCellBytes, time_ns);
  for (std::size_t i = 0; i < kCells; ++i) text += testing::log_release(fmt::format("c{}", i));
  text += testing::log_release("y");
  return parse_program(text, "taken_along.log");
}

ReplayResult run(int time_ns) {
  ReplayOptions o;
  o.heuristic = Heuristic::DtrEq;
  o.cost = CostModel::Time;
  o.budget = 1024 + kCells * kCellBytes + kCellBytes / 2;
  return replay(program(time_ns), o);
}

TEST(TakenAlong, CellsCheaperThanTheSearchShareOne) {
  // One search draws all 100 candidates: 3 us at 30 ns a draw.
  const ReplayResult cheap = run(100), costly = run(1'000'000);
  ASSERT_EQ(cheap.status, ReplayStatus::Ok) << cheap.message;
  ASSERT_EQ(costly.status, ReplayStatus::Ok) << costly.message;
  // The request needs one victim; the headroom (1/64 of the budget, 25 KiB) a second.
  EXPECT_EQ(costly.evictions, 1u);
  EXPECT_EQ(cheap.evictions, 2u);
  // Both from a single search.
  EXPECT_EQ(cheap.candidates_drawn, kCells);
  EXPECT_EQ(costly.candidates_drawn, kCells);
}

}  // namespace
}  // namespace remat::sim
