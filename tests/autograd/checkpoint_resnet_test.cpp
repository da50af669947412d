// A ResNet with checkpointed stages (convolutions SAVE, the element-wise work recomputed) trains
// exactly like the plain one: the same loss, gradients, updated parameters and batch-norm
// buffers, bit for bit, because a replay recomputes with the same kernels and does not update
// running statistics again.  Also with a budget, and with a lower peak.
#include "dtr/pool.h"
#include "models/resnet.h"
#include "nn/nn.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::bit_equal;

struct StepResult {
  std::vector<Tensor> values;  // loss, gradients, then parameters and buffers after the update
  std::size_t peak = 0;        // above what was resident before the step
  std::size_t evictions = 0;
};

// `headroom`: a budget of that many bytes above what is resident before the step.
StepResult resnet_step(bool checkpoint_stages, std::optional<std::size_t> headroom = std::nullopt) {
  Pool& pool = Pool::of(Device::cpu());
  pool.configure(DtrConfig{});
  manual_seed(3);
  auto model = models::resnet(
      "resnet8", {.in_channels = 1, .num_classes = 10, .checkpoint_stages = checkpoint_stages});
  nn::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor x = randn({8, 1, 16, 16}, {.seed = 4});
  Tensor y = randint(0, 10, {8}, {.seed = 5});
  const std::size_t base = pool.resident_bytes();
  if (headroom) pool.set_budget(base + *headroom);
  pool.reset_stats();
  StepResult r;
  {
    Tensor loss = cross_entropy(model->forward(x), y);
    backward(loss);
    r.values.push_back(loss);
  }
  r.peak = pool.peak_resident_bytes() - base;
  r.evictions = pool.stats().evictions;
  for (const auto& p : model->parameters()) r.values.push_back(p.grad());
  sgd.step();
  for (const auto& p : model->parameters()) r.values.push_back(p);
  for (const auto& [name, b] : model->named_buffers()) r.values.push_back(b);
  pool.set_budget(std::nullopt);
  return r;
}

::testing::AssertionResult all_bit_equal(const StepResult& a, const StepResult& b) {
  if (a.values.size() != b.values.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    auto r = bit_equal(a.values[i], b.values[i]);
    if (!r) return r << " (value " << i << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST(CheckpointResNet, CheckpointedStagesTrainBitForBitLikeThePlainModel) {
  reset_checkpoint_report();
  const StepResult checkpointed = resnet_step(true);
  const CheckpointReport report = checkpoint_report();
  const StepResult plain = resnet_step(false);
  EXPECT_TRUE(all_bit_equal(checkpointed, plain));
  EXPECT_LT(checkpointed.peak, plain.peak);
  EXPECT_EQ(report.forwards, 3u);
  EXPECT_EQ(report.replays, 3u);
  for (const char* stage : {"layer1", "layer2", "layer3"}) {
    const RegionReport* conv = report.find(stage, "conv");
    const RegionReport* tail = report.find(stage, "bn_add_relu");
    ASSERT_TRUE(conv && tail) << stage;
    EXPECT_EQ(conv->kernels_replayed, 0u) << stage;
    EXPECT_EQ(conv->kept_tensors, 2u) << stage;  // both convolutions' outputs of the one block
    EXPECT_GT(tail->kernels_replayed, 0u) << stage;
    // Two batch norms per block, five in-place updates each, not repeated.
    EXPECT_EQ(report.find(stage, "bn_relu")->side_effects_skipped + tail->side_effects_skipped, 10u)
        << stage;
  }
}

TEST(CheckpointResNet, CheckpointedStagesUnderABudgetAreBitIdentical) {
  const StepResult free_run = resnet_step(true);
  const StepResult budgeted = resnet_step(true, free_run.peak * 7 / 10);
  EXPECT_GT(budgeted.evictions, 0u);
  EXPECT_LE(budgeted.peak, free_run.peak * 7 / 10);
  EXPECT_TRUE(all_bit_equal(budgeted, free_run));
}

}  // namespace
}  // namespace remat
