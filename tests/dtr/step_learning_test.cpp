// What dtr-next learns from a step in the runtime: reads of a value that stopped being
// recomputable without changing (frozen when a tensor it was computed from is written in
// place) still enter the step's log, so an unbudgeted step predicts the same reads as a
// budgeted one; and under a budget the pool gives each of its scores a trial step.
#include "dtr/pool.h"
#include "ops/inplace.h"
#include "support/test_util.h"

namespace remat {
namespace {

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
  EXPECT_TRUE(pool.score_choice().settled());
  EXPECT_EQ(pool.score_choice().score(), ScoreChoice::Next);  // nothing recomputed: a tie
  pool.set_budget(std::nullopt);
}

}  // namespace
}  // namespace remat
