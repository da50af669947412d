// dtr-next's five trial steps in the runtime (dtr/score_choice.h): ResNet-20 trains through
// its own score's, the damped score's, dtr-eq's, the capped score's and msps's trials at a
// quarter of its peak with the same bytes as without a budget.  There its own score's first trial
// step ran out of budget until a rebuild could let go of the pins held below it
// (Pool::ensure_resident): one through eight records pinned 16.5 of the 24.2 MiB.
#include <cstdio>
#include <cstring>

#include "dtr/pool.h"
#include "support/resnet20_run.h"
#include "support/test_util.h"

namespace remat {
namespace {

class DtrNextTrials : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = Pool::of(Device::cpu()).config(); }
  void TearDown() override { Pool::of(Device::cpu()).configure(saved_); }
  DtrConfig saved_;
};

TEST_F(DtrNextTrials, ResNet20TrainsBitIdenticallyThroughEveryTrialAtAQuarterOfItsPeak) {
  // Two steps measure the peak; then one trial step for each of the five scores.
  constexpr int kSteps = 7;
  const Resnet20Run reference = train_resnet20({.steps = kSteps});
  const Resnet20Run budgeted =
      train_resnet20({.fraction = 0.25, .heuristic = Heuristic::DtrNext, .steps = kSteps});
  EXPECT_TRUE(budgeted.trials_settled);
  ASSERT_EQ(reference.values.size(), budgeted.values.size());
  for (std::size_t i = 0; i < reference.values.size(); ++i)
    ASSERT_EQ(std::memcmp(&reference.values[i], &budgeted.values[i], sizeof(float)), 0)
        << "value " << i;
  EXPECT_GT(budgeted.budget, 0u);
  EXPECT_LE(budgeted.stats.peak_resident_bytes, budgeted.budget);
  EXPECT_GT(budgeted.stats.rematerializations, 0u);
  std::printf(
      "ResNet-20 at 0.25 under dtr-next: budget %.2f MiB, %llu rematerializations in the "
      "five trial steps\n",
      static_cast<double>(budgeted.budget) / (1 << 20),
      static_cast<unsigned long long>(budgeted.stats.rematerializations));
}

}  // namespace
}  // namespace remat
