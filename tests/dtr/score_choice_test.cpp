// dtr-next's choice between its own score and dtr-eq's (dtr/score_choice.h): one trial step
// each under a budget, then the one that recomputed less, the other retried now and then; a
// new budget starts over, and steps that cannot be compared choose nothing.
#include "dtr/score_choice.h"

#include <gtest/gtest.h>

#include <vector>

namespace remat {
namespace {

constexpr std::size_t kBudget = 1000;

TEST(ScoreChoice, TriesBothScoresThenKeepsTheOneThatRecomputedLess) {
  ScoreChoice c;
  EXPECT_EQ(c.score(), ScoreChoice::Next);
  c.end_step(std::nullopt, true, 0);  // unbudgeted: nothing to compare
  EXPECT_EQ(c.score(), ScoreChoice::Next);
  EXPECT_FALSE(c.settled());
  c.end_step(kBudget, true, 5);  // dtr-next's trial
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
  EXPECT_FALSE(c.settled());
  c.end_step(kBudget, true, 3);  // dtr-eq's trial, cheaper
  EXPECT_TRUE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
  c.end_step(kBudget, true, 3);
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
}

TEST(ScoreChoice, TiesGoToDtrNext) {
  ScoreChoice c;
  c.end_step(kBudget, true, 4);
  c.end_step(kBudget, true, 4);
  EXPECT_EQ(c.score(), ScoreChoice::Next);
}

TEST(ScoreChoice, TheLoserIsRetriedAfterKRetrySteps) {
  ScoreChoice c;
  c.end_step(kBudget, true, 1);  // dtr-next, cheaper
  c.end_step(kBudget, true, 2);  // dtr-eq
  std::vector<std::uint64_t> eq_steps;
  for (std::uint64_t i = 0; i < 4 * ScoreChoice::kRetrySteps; ++i) {
    if (c.score() == ScoreChoice::Eq) eq_steps.push_back(i);
    c.end_step(kBudget, true, c.score() == ScoreChoice::Next ? 1 : 2);
  }
  // A retry once kRetrySteps steps have passed since the loser's last trial.
  ASSERT_GE(eq_steps.size(), 3u);
  for (std::size_t k = 1; k < eq_steps.size(); ++k)
    EXPECT_EQ(eq_steps[k] - eq_steps[k - 1], ScoreChoice::kRetrySteps + 1);
  // The retry found dtr-eq cheaper now: it keeps the steps.
  while (c.score() != ScoreChoice::Eq) c.end_step(kBudget, true, 1);
  c.end_step(kBudget, true, 0.5);
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
}

TEST(ScoreChoice, ANewBudgetStartsOver) {
  ScoreChoice c;
  c.end_step(kBudget, true, 5);
  c.end_step(kBudget, true, 3);
  ASSERT_EQ(c.score(), ScoreChoice::Eq);
  c.end_step(2 * kBudget, true, 1);  // dtr-eq's step under the new budget: its trial there
  EXPECT_FALSE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Next);
  c.end_step(2 * kBudget, true, 2);
  EXPECT_TRUE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
}

TEST(ScoreChoice, AStepOffTheLastOnesPathChoosesNothing) {
  ScoreChoice c;
  c.end_step(kBudget, true, 5);
  c.end_step(kBudget, false, 0);  // diverged (another tree): recorded nowhere
  EXPECT_EQ(c.score(), ScoreChoice::Next);
  EXPECT_FALSE(c.settled());
}

TEST(ScoreChoice, AFailedTrialLoses) {
  ScoreChoice c;
  c.end_step(kBudget, true, std::numeric_limits<double>::infinity());  // dtr-next thrashed
  c.end_step(kBudget, true, 7);
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
}

}  // namespace
}  // namespace remat
