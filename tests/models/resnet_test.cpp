// ResNets: parameter counts against the published architectures (and torchvision), output
// shapes, option validation, and a training step under a budget equal to the unbudgeted one.
#include "dtr/pool.h"
#include "models/resnet.h"
#include "ops/loss.h"
#include "support/test_util.h"

namespace remat {
namespace {

std::int64_t count(const nn::Module& m) {
  std::int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

TEST(ResNet, ParameterCountsMatchThePublishedModels) {
  // He et al. 2016 (CIFAR, option A shortcuts): ResNet-20 0.27M, ResNet-56 0.85M parameters
  // (exactly 269,722 and 853,018 for the same architecture built in PyTorch 1.13);
  // torchvision: resnet18 11,689,512 and resnet50 25,557,032 with 1000 classes.
  EXPECT_EQ(count(*models::resnet("resnet20")), 269722);
  EXPECT_EQ(count(*models::resnet("resnet56")), 853018);
  EXPECT_EQ(count(*models::resnet("resnet18", {.in_channels = 3, .num_classes = 1000})), 11689512);
  EXPECT_EQ(count(*models::resnet("resnet50", {.in_channels = 3, .num_classes = 1000})), 25557032);
}

TEST(ResNet, OutputShapesAndOptions) {
  auto net = models::resnet("resnet20", {.in_channels = 1, .num_classes = 7});
  EXPECT_EQ(net->forward(randn({2, 1, 28, 28}, {.seed = 1})).shape(), (Shape{2, 7}));
  auto big = models::resnet("resnet18", {.in_channels = 1, .num_classes = 5});
  EXPECT_EQ(big->forward(randn({1, 1, 64, 64}, {.seed = 2})).shape(), (Shape{1, 5}));
  EXPECT_THROW(models::resnet("resnet21"), Error);
  EXPECT_THROW(models::resnet("vgg16"), Error);
  EXPECT_THROW(models::resnet("resnet20", {.in_channels = 0}), Error);
  EXPECT_THROW(net->forward(randn({1, 28, 28}, {.seed = 3})), Error);
}

TEST(ResNet, TrainingStepUnderABudgetIsBitIdentical) {
  Pool& pool = Pool::of(Device::cpu());
  const DtrConfig saved = pool.config();
  auto step = [](std::optional<std::size_t> budget, std::size_t* peak) {
    Pool& pool = Pool::of(Device::cpu());
    manual_seed(5);
    auto net = models::resnet("resnet20", {.in_channels = 1, .num_classes = 10});
    Tensor x = randn({16, 1, 28, 28}, {.seed = 6});
    Tensor y = randint(0, 10, {16}, {.seed = 7});
    pool.reset_stats();
    pool.set_budget(budget);
    Tensor loss = cross_entropy(net->forward(x), y);
    backward(loss);
    if (peak) *peak = pool.stats().peak_resident_bytes;
    std::vector<float> values{loss.item<float>()};
    pool.set_budget(std::nullopt);
    for (auto& [name, p] : net->named_parameters()) {
      auto g = p.grad().to_vector<float>();
      values.insert(values.end(), g.begin(), g.end());
    }
    for (auto& [name, b] : net->named_buffers()) {
      auto v = b.to_vector<float>();
      values.insert(values.end(), v.begin(), v.end());
    }
    return values;
  };
  std::size_t peak = 0;
  const auto reference = step(std::nullopt, &peak);
  std::size_t budgeted_peak = 0;
  const auto budgeted = step(pool.resident_bytes() + (peak - pool.resident_bytes()) / 2, &budgeted_peak);
  ASSERT_EQ(reference.size(), budgeted.size());
  for (std::size_t i = 0; i < reference.size(); ++i)
    ASSERT_EQ(std::memcmp(&reference[i], &budgeted[i], sizeof(float)), 0) << "value " << i;
  EXPECT_LT(budgeted_peak, peak);
  pool.configure(saved);
}

}  // namespace
}  // namespace remat
