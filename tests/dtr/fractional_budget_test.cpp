// Fractional budgets are measured on a steady-state step: the first step of an optimizer with
// state (SGD momentum) peaks lower than the following ones, so the fraction is taken of the
// second step's peak, through the pool's own API (Pool::set_budget_fraction, end_step).
#include "dtr/pool.h"
#include "nn/nn.h"
#include "support/test_util.h"

namespace remat {
namespace {

TEST(FractionalBudget, MeasuredOnTheSecondStepWhereOptimizerStateExists) {
  Pool& pool = Pool::of(Device::cpu());
  pool.configure({});
  auto net = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(64, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 8));
  nn::SGD opt(net->parameters(), {.lr = 0.01, .momentum = 0.9});
  Tensor x = randn({256, 64}, {.seed = 1});
  Tensor y = randint(0, 8, {256}, {.seed = 2});
  auto step = [&] {
    {
      Tensor loss = cross_entropy(net->forward(x), y);
      opt.zero_grad();
      backward(loss);
    }
    opt.step();
  };
  // 0.9: the smallest feasible fraction of this MLP is about 0.83 (a weight gradient evicted
  // while its input gradient is computed comes back through its inputs).
  pool.set_budget_fraction(0.9);
  pool.reset_peak();
  step();
  const std::size_t first_peak = pool.peak_resident_bytes();
  EXPECT_FALSE(pool.end_step());  // not measured yet
  EXPECT_FALSE(pool.budget());
  step();
  const std::size_t second_peak = pool.peak_resident_bytes();
  const auto budget = pool.end_step();
  ASSERT_TRUE(budget);
  // The momentum buffers (one per parameter) exist only from the first step's update on.
  EXPECT_GT(second_peak, first_peak);
  EXPECT_EQ(*pool.measured_peak(), second_peak);
  EXPECT_EQ(*budget, static_cast<std::size_t>(0.9 * static_cast<double>(second_peak)));
  EXPECT_EQ(pool.budget(), budget);
  pool.reset_peak();
  step();
  EXPECT_LE(pool.peak_resident_bytes(), *budget);
  EXPECT_FALSE(pool.end_step());  // resolved once
  EXPECT_TRUE(testing::throws_with([&] { pool.set_budget_fraction(1.5); },
                                   {"set_budget_fraction", "(0, 1]"}));
  pool.set_budget(std::nullopt);
}

}  // namespace
}  // namespace remat
