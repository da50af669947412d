// dtr-next's choice among its three scores, dtr-eq's and msps's (dtr/score_choice.h), each with
// the full sample and, where searches are priced, the small one with the score whose full-sample
// trial cost least: one trial step each under a budget, then the one whose step cost least, the
// others retried one at a time, at most one every kRetrySteps steps; a new budget starts over,
// and steps that cannot be compared choose only the sample.
#include "dtr/score_choice.h"

#include <gtest/gtest.h>

#include <vector>

namespace remat {
namespace {

constexpr std::size_t kBudget = 1000;

TEST(ScoreChoice, TriesEachScoreThenKeepsTheOneThatRecomputedLeast) {
  ScoreChoice c;
  EXPECT_EQ(c.score(), ScoreChoice::Next);
  c.end_step(std::nullopt, true, 0);  // unbudgeted: nothing to compare
  EXPECT_EQ(c.score(), ScoreChoice::Next);
  EXPECT_FALSE(c.settled());
  c.end_step(kBudget, true, 5);  // dtr-next's trial
  EXPECT_EQ(c.score(), ScoreChoice::Damped);
  EXPECT_FALSE(c.settled());
  c.end_step(kBudget, true, 4);  // the damped score's trial
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
  EXPECT_FALSE(c.settled());
  c.end_step(kBudget, true, 3);  // dtr-eq's trial, cheapest
  EXPECT_EQ(c.score(), ScoreChoice::Capped);
  EXPECT_FALSE(c.settled());
  c.end_step(kBudget, true, 3.5);  // the capped score's trial
  EXPECT_EQ(c.score(), ScoreChoice::Msps);
  EXPECT_FALSE(c.settled());
  c.end_step(kBudget, true, 3.2);  // msps's trial
  EXPECT_TRUE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
  c.end_step(kBudget, true, 3);
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
}

TEST(ScoreChoice, TheCappedScoreKeepsTheStepsWhenItRecomputedLeast) {
  ScoreChoice c;
  for (double cost : {5.0, 4.0, 3.0, 2.0, 2.5}) c.end_step(kBudget, true, cost);
  EXPECT_TRUE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Capped);
}

TEST(ScoreChoice, TheMspsScoreKeepsTheStepsWhenItRecomputedLeast) {
  ScoreChoice c;
  for (double cost : {5.0, 4.0, 3.0, 2.5, 2.0}) c.end_step(kBudget, true, cost);
  EXPECT_TRUE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Msps);
}

TEST(ScoreChoice, TheDampedScoreKeepsTheStepsWhenItRecomputedLeast) {
  ScoreChoice c;
  for (double cost : {5.0, 2.0, 3.0, 4.0, 2.0}) c.end_step(kBudget, true, cost);
  EXPECT_EQ(c.score(), ScoreChoice::Damped);
}

TEST(ScoreChoice, TiesGoToTheEarlierScore) {
  ScoreChoice c;
  for (double cost : {4.0, 4.0, 4.0, 4.0, 4.0}) c.end_step(kBudget, true, cost);
  EXPECT_EQ(c.score(), ScoreChoice::Next);
  ScoreChoice d;
  for (double cost : {5.0, 4.0, 4.0, 4.0, 4.0}) d.end_step(kBudget, true, cost);
  EXPECT_EQ(d.score(), ScoreChoice::Damped);
}

TEST(ScoreChoice, OneLoserIsRetriedEveryKRetrySteps) {
  ScoreChoice c;
  c.end_step(kBudget, true, 1);  // dtr-next, cheapest
  c.end_step(kBudget, true, 3);  // damped
  c.end_step(kBudget, true, 2);  // dtr-eq
  c.end_step(kBudget, true, 5);  // capped
  c.end_step(kBudget, true, 4);  // msps
  auto cost = [](ScoreChoice::Score s) {
    return s == ScoreChoice::Next ? 1.0 : 2.0 + static_cast<double>(s);
  };
  std::vector<std::uint64_t> retries;  // the steps, counted from here, of the losers' retries
  std::vector<ScoreChoice::Score> retried;
  for (std::uint64_t i = 0; i < 10 * ScoreChoice::kRetrySteps; ++i) {
    if (c.score() != ScoreChoice::Next) retries.push_back(i), retried.push_back(c.score());
    c.end_step(kBudget, true, cost(c.score()));
  }
  // The losers take turns, the one tried longest ago first, each retry kRetrySteps steps after
  // the last trial of any loser: at most one step in kRetrySteps + 1 goes to a loser.
  ASSERT_GE(retries.size(), 8u);
  EXPECT_EQ(retries[0], ScoreChoice::kRetrySteps);  // the 33rd step after msps's trial
  for (std::size_t k = 1; k < retries.size(); ++k)
    EXPECT_EQ(retries[k] - retries[k - 1], ScoreChoice::kRetrySteps + 1) << k;
  const ScoreChoice::Score turns[] = {ScoreChoice::Damped, ScoreChoice::Eq, ScoreChoice::Capped,
                                      ScoreChoice::Msps};
  for (std::size_t k = 0; k < retried.size(); ++k) EXPECT_EQ(retried[k], turns[k % 4]) << k;
  // A retry found dtr-eq cheapest now: it keeps the steps.
  while (c.score() != ScoreChoice::Eq) c.end_step(kBudget, true, cost(c.score()));
  c.end_step(kBudget, true, 0.5);
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
  c.end_step(kBudget, true, 0.5);
  EXPECT_EQ(c.score(), ScoreChoice::Eq);
}

TEST(ScoreChoice, ANewBudgetStartsOver) {
  ScoreChoice c;
  for (double cost : {5.0, 4.0, 3.0, 4.0, 4.0}) c.end_step(kBudget, true, cost);
  ASSERT_EQ(c.score(), ScoreChoice::Eq);
  c.end_step(2 * kBudget, true, 1);  // dtr-eq's step under the new budget: its trial there
  EXPECT_FALSE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Next);
  c.end_step(2 * kBudget, true, 2);
  EXPECT_EQ(c.score(), ScoreChoice::Damped);
  c.end_step(2 * kBudget, true, 2);
  EXPECT_EQ(c.score(), ScoreChoice::Capped);
  c.end_step(2 * kBudget, true, 2);
  EXPECT_EQ(c.score(), ScoreChoice::Msps);
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

TEST(ScoreChoice, WithoutPricedSearchesEverySampleIsTheFullOne) {
  ScoreChoice c;
  EXPECT_EQ(c.options(), ScoreChoice::kScores);
  for (double cost : {5.0, 4.0, 3.0, 3.0, 3.0, 3.0}) {
    EXPECT_FALSE(c.small_sample());
    c.end_step(kBudget, true, cost);
  }
  EXPECT_TRUE(c.settled());
  EXPECT_FALSE(c.small_sample());
}

TEST(ScoreChoice, PricedSearchesTryTheBestScoreWithTheSmallSampleToo) {
  ScoreChoice c(true);
  EXPECT_EQ(c.options(), ScoreChoice::kOptions);
  // Trials: the five scores with the full sample, then the small one with the damped score,
  // whose full-sample trial cost least.  With the small sample it costs less still.
  const ScoreChoice::Score order[] = {ScoreChoice::Next, ScoreChoice::Damped,
                                      ScoreChoice::Eq,   ScoreChoice::Capped,
                                      ScoreChoice::Msps, ScoreChoice::Damped};
  const double costs[] = {5, 4, 6, 5, 4.5, 3};
  for (std::size_t o = 0; o < std::size(costs); ++o) {
    EXPECT_FALSE(c.settled()) << o;
    EXPECT_EQ(c.score(), order[o]) << o;
    EXPECT_EQ(c.small_sample(), o >= ScoreChoice::kScores) << o;
    c.end_step(kBudget, true, costs[o]);
  }
  EXPECT_TRUE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Damped);
  EXPECT_TRUE(c.small_sample());
  // A tie between the samples goes to the full one (tried first).
  ScoreChoice d(true);
  for (double cost : {5.0, 4.0, 6.0, 5.0, 5.0, 4.0}) d.end_step(kBudget, true, cost);
  EXPECT_TRUE(d.settled());
  EXPECT_EQ(d.score(), ScoreChoice::Damped);
  EXPECT_FALSE(d.small_sample());
}

// A retry that makes another score the cheapest with the full sample brings in that score's
// small-sample option: it is tried on the next step.
TEST(ScoreChoice, ARetryCanBringInAnotherSmallSampleOption) {
  ScoreChoice c(true);
  for (double cost : {3.0, 4.0, 6.0, 5.0, 5.0, 3.5}) c.end_step(kBudget, true, cost);
  ASSERT_TRUE(c.settled());
  ASSERT_EQ(c.score(), ScoreChoice::Next);
  ASSERT_FALSE(c.small_sample());
  // The retries, one every kRetrySteps steps: the damped score's first; it costs least now.
  while (c.score() == ScoreChoice::Next) c.end_step(kBudget, true, 3);
  ASSERT_EQ(c.score(), ScoreChoice::Damped);
  c.end_step(kBudget, true, 1);
  EXPECT_FALSE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Damped);
  EXPECT_TRUE(c.small_sample());
  c.end_step(kBudget, true, 2);  // the damped score's small-sample trial: dearer
  EXPECT_TRUE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Damped);
  EXPECT_FALSE(c.small_sample());
}

// Searches priced: the least step cost is kept among the options that recomputed no more than
// dtr-eq's trial with the full sample.
TEST(ScoreChoice, AnOptionRecomputingMoreThanDtrEqIsNotKept) {
  ScoreChoice c(true);
  c.end_step(kBudget, true, 5, 4);    // dtr-next, full sample
  c.end_step(kBudget, true, 5, 3.9);  // damped, full sample
  c.end_step(kBudget, true, 5.5, 4);  // dtr-eq, full sample: the most any kept one recomputes
  c.end_step(kBudget, true, 5.2, 4);  // capped, full sample
  c.end_step(kBudget, true, 5.1, 4);  // msps, full sample
  EXPECT_FALSE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Damped);
  EXPECT_TRUE(c.small_sample());
  c.end_step(kBudget, true, 6, 0.5);  // damped, small sample: cheapest, recomputes more
  EXPECT_TRUE(c.settled());
  EXPECT_EQ(c.score(), ScoreChoice::Damped);
  EXPECT_FALSE(c.small_sample());
}

// Steps that did not follow the last one compare the two samples per second of their calls'
// kernel time: the full sample first, the small one next, then the cheaper, the other retried
// after kRetrySteps.
TEST(ScoreChoice, DivergedStepsChooseTheSampleCheaperPerSecondOfCompute) {
  ScoreChoice c(true);
  EXPECT_FALSE(c.small_sample());
  c.end_step(kBudget, false, 2, 2, 10);  // full sample: 0.4 per second of compute
  EXPECT_TRUE(c.small_sample());
  c.end_step(kBudget, false, 3, 1, 20);  // small sample: 0.2, though it recomputed more
  EXPECT_TRUE(c.small_sample());
  EXPECT_EQ(c.score(), ScoreChoice::Next);  // no prediction in such a step anyway
  for (std::uint64_t i = 2; i < ScoreChoice::kRetrySteps; ++i) {
    c.end_step(kBudget, false, 3, 1, 20);
    EXPECT_TRUE(c.small_sample()) << i;
  }
  c.end_step(kBudget, false, 3, 1, 20);  // the full sample's retry is due
  EXPECT_FALSE(c.small_sample());
  c.end_step(kBudget, false, 1, 1, 20);  // now 0.1: the full sample is kept
  EXPECT_FALSE(c.small_sample());
}

TEST(ScoreChoice, DivergedStepsKeepTheFullSampleWhereSearchesAreNotPriced) {
  ScoreChoice c;
  for (int i = 0; i < 4; ++i) {
    c.end_step(kBudget, false, 2, 0, 10);
    EXPECT_FALSE(c.small_sample());
    EXPECT_EQ(c.score(), ScoreChoice::Next);
  }
}

TEST(ScoreChoice, AFailedTrialLoses) {
  ScoreChoice c;
  c.end_step(kBudget, true, std::numeric_limits<double>::infinity());  // dtr-next thrashed
  c.end_step(kBudget, true, 7);
  c.end_step(kBudget, true, 8);
  c.end_step(kBudget, true, std::numeric_limits<double>::infinity());  // so did the capped one
  c.end_step(kBudget, true, std::numeric_limits<double>::infinity());  // and msps
  EXPECT_EQ(c.score(), ScoreChoice::Damped);
}

}  // namespace
}  // namespace remat
