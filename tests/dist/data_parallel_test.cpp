// DistributedDataParallel in one process (a group of one; the two-rank runs are in
// mpi_test.cpp): the averaged gradients equal plain backward's bit for bit, buckets follow
// bucket_bytes in reverse parameter order, a parameter the loss does not reach gets zeros, and
// gradient accumulation over several backward passes still matches.
#include <gtest/gtest.h>

#include "dist/dist.h"
#include "nn/nn.h"
#include "ops/loss.h"
#include "support/test_util.h"

namespace remat::dist {
namespace {

std::shared_ptr<nn::Sequential> mlp(std::uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(6, 16),
                                          std::make_shared<nn::Tanh>(),
                                          std::make_shared<nn::Linear>(16, 3));
}

TEST(DataParallel, OneRankGivesPlainGradientsBitForBit) {
  auto plain = mlp(4), wrapped = mlp(4);
  auto comm = make_local_communicator();
  DistributedDataParallel ddp(wrapped, *comm, {.bucket_bytes = 256});
  // Parameters in reverse: bias 3, weight 48, bias 16, weight 96 floats; 256 bytes a bucket.
  EXPECT_EQ(ddp.bucket_bytes(), (std::vector<std::size_t>{12 + 192, 64, 384}));
  const Tensor x = randn({5, 6}, {.seed = 7});
  const Tensor y = tensor<std::int64_t>({0, 2, 1, 1, 0});
  for (int pass = 0; pass < 2; ++pass) {  // the second accumulates into the first
    backward(cross_entropy(plain->forward(x), y));
    backward(cross_entropy(ddp(x), y));
  }
  const auto a = plain->parameters(), b = wrapped->parameters();
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(testing::bit_equal(a[i].grad(), b[i].grad())) << "parameter " << i;
  EXPECT_EQ(ddp.stats().reductions, 2);
  EXPECT_EQ(ddp.stats().bytes_reduced, 2 * (3 + 48 + 16 + 96) * 4);
}

TEST(DataParallel, AParameterTheLossMissesGetsZeros) {
  auto model = mlp(5);
  auto comm = make_local_communicator();
  DistributedDataParallel ddp(model, *comm);
  auto first = std::dynamic_pointer_cast<nn::Linear>(model->children()[0]);
  ASSERT_TRUE(first);
  // Only the first layer's weight takes part.
  backward(sum(first->forward(randn({2, 6}, {.seed = 1}))));
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    if (name.rfind("2.", 0) == 0) {
      for (float v : p.grad().to_vector<float>()) EXPECT_EQ(v, 0.0f) << name;
    }
  }
}

TEST(DataParallel, BadInputIsAClearError) {
  auto comm = make_local_communicator();
  EXPECT_TRUE(testing::throws_with([&] { DistributedDataParallel(nullptr, *comm); },
                                   {"the module is null"}));
  EXPECT_TRUE(
      testing::throws_with([&] { DistributedDataParallel(mlp(1), *comm, {.bucket_bytes = 0}); },
                           {"bucket_bytes must be positive"}));
  EXPECT_TRUE(testing::throws_with([] { world(); }, {"call dist::init() first"}));
}

}  // namespace
}  // namespace remat::dist
