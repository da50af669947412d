// The README's code sample, compiled and run, so the documentation stays true.
#include "nn/nn.h"
#include "support/test_util.h"

namespace remat {
namespace {

TEST(Readme, QuickStartSampleTrainsUnderABudget) {
  Pool& pool = Pool::of(Device::cpu());
  const DtrConfig saved = pool.config();
  auto net = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(784, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 10));
  nn::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  pool.set_budget(pool.resident_bytes() + (64 << 20));  // the README's 64 MiB, on top of what is here

  Tensor x = randn({32, 784}, {.seed = 1});
  Tensor y = randint(0, 10, {32}, {.seed = 2});
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    Tensor loss = cross_entropy(net->forward(x), y);
    opt.zero_grad();
    backward(loss);
    opt.step();
    (step == 0 ? first : last) = loss.item<float>();
  }
  EXPECT_LT(last, first * 0.5) << "the sample should fit its batch";
  EXPECT_LE(pool.stats().peak_resident_bytes, *pool.budget());
  pool.configure(saved);
}

}  // namespace
}  // namespace remat
