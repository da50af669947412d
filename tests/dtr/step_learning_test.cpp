// What dtr-next learns from a step in the runtime: reads of a value that stopped being
// recomputable without changing (frozen when a tensor it was computed from is written in
// place) still enter the step's log, so an unbudgeted step predicts the same reads as a
// budgeted one; and under a budget the pool gives each of its scores a trial step.
#include "dtr/pool.h"
#include "ops/inplace.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::cell_of;

class StepLearning : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = Pool::of(Device::cpu()).config(); }
  void TearDown() override { Pool::of(Device::cpu()).configure(saved_); }
  DtrConfig saved_;
};

// Call 0 sums x into s; x is then written in place (s, smaller than x, is frozen rather than
// copied: it loses its record), and call 1 reads s.
void step(const Tensor& x) {
  Tensor s = sum(x);
  {
    NoGradGuard no_grad;
    add_(x, 1.0);
  }
  Tensor t = add(s, s);
  (void)t.item<float>();
}

TEST_F(StepLearning, ReadsOfAFrozenValueEnterTheLog) {
  Pool& pool = Pool::of(Device::cpu());
  DtrConfig cfg;
  cfg.heuristic = Heuristic::DtrNext;
  pool.configure(cfg);
  Tensor x = ones({1024});
  pool.end_step();  // the step starts here
  step(x);
  pool.end_step();
  const StepLog& log = pool.last_step_log();
  ASSERT_GE(log.calls(), 2u);
  // The call after the in-place write reads the sum made by the step's first call.
  const auto read = log.next_use(0, 0, 1);
  ASSERT_TRUE(read.has_value());
  EXPECT_GE(*read, 1u);
}

TEST_F(StepLearning, EachScoreGetsATrialStepUnderABudget) {
  Pool& pool = Pool::of(Device::cpu());
  DtrConfig cfg;
  cfg.heuristic = Heuristic::DtrNext;
  cfg.cost = CostModel::Flops;
  pool.configure(cfg);
  Tensor x = ones({1024});
  pool.end_step();  // the steps start here
  step(x);
  pool.end_step();
  EXPECT_FALSE(pool.score_choice().settled());
  pool.set_budget(pool.resident_bytes() + (1 << 20));
  EXPECT_EQ(pool.score_choice().score(), ScoreChoice::Next);
  step(x);
  pool.end_step();  // dtr-next's trial
  EXPECT_EQ(pool.score_choice().score(), ScoreChoice::Damped);
  step(x);
  pool.end_step();  // the damped score's trial
  EXPECT_EQ(pool.score_choice().score(), ScoreChoice::Eq);
  step(x);
  pool.end_step();  // dtr-eq's trial
  EXPECT_EQ(pool.score_choice().score(), ScoreChoice::Capped);
  step(x);
  pool.end_step();  // the capped score's trial
  EXPECT_EQ(pool.score_choice().score(), ScoreChoice::Msps);
  step(x);
  pool.end_step();  // msps's trial
  EXPECT_TRUE(pool.score_choice().settled());
  EXPECT_EQ(pool.score_choice().score(), ScoreChoice::Next);  // nothing recomputed: a tie
  pool.set_budget(std::nullopt);
}

// dtr-next's fifth score is msps's: a step that follows the last one evicts, under it, the victim
// msps evicts.  Unit costs: msps evicts the larger of two cells (1/m), dtr-eq the one whose
// size and staleness make the larger product (1/(m·s)), here the smaller, stale one.
TEST_F(StepLearning, TheMspsScoreEvictsAsMspsDoes) {
  constexpr std::int64_t kSmall = 4096, kLarge = 2 * kSmall;  // 16 and 32 KiB: not tiny
  // Constants, never evicted: the two values made from them are the only candidates.
  auto constant = [](std::int64_t n) { return tensor(std::vector<float>(n, 0.5f)); };
  Tensor a = constant(kSmall), b = constant(kLarge), c = constant(kSmall / 2), t = constant(4);
  // Which of the stale small value and the fresh large one the step's last op evicts; the step
  // before it unbudgeted, the budget one byte short of the last op's output.
  auto victim = [&](Heuristic h, std::optional<ScoreChoice::Score> score) {
    Pool& pool = Pool::of(Device::cpu());
    DtrConfig cfg;
    cfg.heuristic = h;
    cfg.cost = CostModel::Unit;
    pool.configure(cfg);
    std::size_t before_last = 0;
    auto step = [&](bool last) {
      Tensor stale = exp(a);
      for (int i = 0; i < 100; ++i) (void)tanh(t);  // calls whose outputs go at once
      Tensor fresh = exp(b);
      before_last = pool.resident_bytes();
      Tensor out = exp(c);
      if (!last) return std::string("none");
      EXPECT_NE(cell_of(stale).resident(), cell_of(fresh).resident());
      return std::string(cell_of(fresh).resident() ? "stale" : "fresh");
    };
    pool.end_step();
    step(false);
    pool.end_step();
    if (score) {  // trial steps in which `score` cost least
      ScoreChoice choice;
      for (std::size_t o = 0; o < ScoreChoice::kScores; ++o)
        choice.end_step(1, true, o == *score ? 1.0 : 2.0);
      EXPECT_EQ(choice.score(), *score);
      pool.set_score_choice(choice);
    }
    pool.set_budget(before_last + kSmall / 2 * sizeof(float) - 1);
    const std::string evicted = step(true);
    pool.set_budget(std::nullopt);
    return evicted;
  };
  EXPECT_EQ(victim(Heuristic::Msps, std::nullopt), "fresh");
  EXPECT_EQ(victim(Heuristic::DtrEq, std::nullopt), "stale");
  EXPECT_EQ(victim(Heuristic::DtrNext, ScoreChoice::Msps), "fresh");
  EXPECT_EQ(victim(Heuristic::DtrNext, ScoreChoice::Eq), "stale");
}

}  // namespace
}  // namespace remat
