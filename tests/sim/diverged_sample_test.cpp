// dtr-next on steps that do not follow the last one (another op at some call, as a dynamic
// model's next tree): scored as dtr-eq, they choose only the sample, by cost per second of the
// step's kernel time: the full sample first, then the small one, then the cheaper.
#include "dtr/score_choice.h"
#include "sim/read.h"
#include "sim/runs.h"
#include "support/sim_log.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

constexpr std::size_t kCells = 100, kCellBytes = 16384;
constexpr int kSteps = 4;

// kSteps steps, each of its own op (so none follows the last): kCells values of one call each
// (1 ms kernels: none cheaper than a search), all held, then one more that needs a victim.
Program program() {
  std::string text = testing::log_start() + testing::log_constant("x", 1024);
  for (int step = 0; step < kSteps; ++step) {
    const std::string op = fmt::format("f{}", step);
    for (std::size_t i = 0; i < kCells; ++i)
      text += testing::log_call(op, fmt::format("c{}_{}", step, i), {"x"}, kCellBytes, 1'000'000);
    text += testing::log_call(op, fmt::format("y{}", step), {"x"}, kCellBytes, 1'000'000);
    for (std::size_t i = 0; i < kCells; ++i)
      text += testing::log_release(fmt::format("c{}_{}", step, i));
    text += testing::log_release(fmt::format("y{}", step)) +
            R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"STEP_END"})"
            "\n";
  }
  return parse_program(text, "diverged.log");
}

ReplayResult run(Heuristic h) {
  ReplayOptions o;
  o.heuristic = h;
  o.cost = CostModel::Time;
  o.budget = 1024 + kCells * kCellBytes + kCellBytes / 2;
  return replay(program(), o);
}

TEST(DivergedSteps, KeepTheSmallSampleWhenItCostsLess) {
  const ReplayResult eq = run(Heuristic::DtrEq), next = run(Heuristic::DtrNext);
  ASSERT_EQ(eq.status, ReplayStatus::Ok) << eq.message;
  ASSERT_EQ(next.status, ReplayStatus::Ok) << next.message;
  // One search a step, the same victims: nothing is read again.
  EXPECT_EQ(eq.evictions, static_cast<std::uint64_t>(kSteps));
  EXPECT_EQ(next.evictions, eq.evictions);
  EXPECT_EQ(next.rematerializations, 0u);
  // dtr-eq draws every candidate each step; dtr-next in its first step only, then the small
  // sample (its trial, then kept: as many recomputed, fewer draws).
  EXPECT_EQ(eq.candidates_drawn, kSteps * kCells);
  EXPECT_EQ(next.candidates_drawn, kCells + (kSteps - 1) * ScoreChoice::kSmallSample);
}

}  // namespace
}  // namespace remat::sim
