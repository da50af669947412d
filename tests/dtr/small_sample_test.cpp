// dtr-next's small sample (dtr/score_choice.h): once its trial steps chose it, a search draws
// ScoreChoice::kSmallSample cells; otherwise the full sample, here every candidate.  The draws
// are counted (DtrStats::candidates_drawn) and, where the cost model is in seconds, priced
// into the trial steps' costs.
#include <vector>

#include "dtr/pool.h"
#include "nn/nn.h"
#include "support/test_util.h"

namespace remat {
namespace {

class SmallSample : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = pool().config(); }
  void TearDown() override { pool().configure(saved_); }
  static Pool& pool() { return Pool::of(Device::cpu()); }
  DtrConfig saved_;
};

// Trial costs that leave dtr-next's own score chosen, with the small sample or the full one.
ScoreChoice chosen(bool small) {
  ScoreChoice c(true);
  // The five scores with the full sample, then the small one with dtr-next's, the first of
  // those that cost least.
  const double costs[] = {small ? 5.0 : 1.0, 5, 5, 5, 5, small ? 1.0 : 5.0};
  for (double cost : costs) c.end_step(1, true, cost);
  return c;
}

TEST_F(SmallSample, ASearchDrawsTheSmallSampleOnceTheTrialsChoseIt) {
  // 256 KiB each: neither tiny nor cheaper to recompute than a search, so no batch is taken.
  constexpr std::size_t kCells = 100, kFloats = 65536;
  for (bool small : {true, false}) {
    DtrConfig cfg = saved_;
    cfg.heuristic = Heuristic::DtrNext;
    cfg.cost = CostModel::Time;
    cfg.sample = 0;
    pool().configure(cfg);
    const ScoreChoice choice = chosen(small);
    ASSERT_EQ(choice.small_sample(), small);
    pool().set_score_choice(choice);
    Tensor x = randn({static_cast<std::int64_t>(kFloats)}, {.seed = 5});
    std::vector<Tensor> kept;
    for (std::size_t i = 0; i < kCells; ++i) kept.push_back(exp(x));
    // Room for half a cell more: the next output evicts one cell, after one search.
    pool().set_budget(pool().resident_bytes() + kFloats * sizeof(float) / 2);
    pool().reset_stats();
    Tensor y = tanh(x);
    const DtrStats s = pool().stats();
    EXPECT_EQ(s.evictions, 1u) << small;
    if (small)
      EXPECT_EQ(s.candidates_drawn, ScoreChoice::kSmallSample);
    else  // the full sample is at least 256 cells: here a pass over every candidate
      EXPECT_GE(s.candidates_drawn, kCells);
    pool().set_budget(std::nullopt);
  }
}

TEST_F(SmallSample, ChoosesNoSmallSampleWhereSearchesAreNotPriced) {
  DtrConfig cfg = saved_;
  cfg.heuristic = Heuristic::DtrNext;
  cfg.cost = CostModel::Flops;  // not in seconds: a draw has no price against recomputation
  pool().configure(cfg);
  EXPECT_EQ(pool().score_choice().options(), ScoreChoice::kScores);
  cfg.cost = CostModel::Time;
  cfg.sample = 64;  // fixed by the configuration
  pool().configure(cfg);
  EXPECT_EQ(pool().score_choice().options(), ScoreChoice::kScores);
  cfg.sample = 0;
  pool().configure(cfg);
  EXPECT_EQ(pool().score_choice().options(), ScoreChoice::kOptions);
  // The examples' --dtr-cost sets the model after the pool was configured.
  pool().set_cost_model(CostModel::Flops);
  EXPECT_EQ(pool().score_choice().options(), ScoreChoice::kScores);
  pool().set_cost_model(CostModel::Time);
  EXPECT_EQ(pool().score_choice().options(), ScoreChoice::kOptions);
}

}  // namespace
}  // namespace remat
