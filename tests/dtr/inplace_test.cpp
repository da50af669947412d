// In-place ops: true in place when nothing can replay from the old value, copy-on-write
// otherwise, so rematerialization always reads the value the op originally read.
#include "dtr/pool.h"
#include "nn/nn.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::bit_equal;

using testing::cell_of;

TEST(Inplace, ValuesMatchTheOutOfPlaceOps) {
  Tensor a = tensor<float>({1, 2, 3, 4}), b = tensor<float>({0.5f, -1, 2, 8});
  Tensor x = clone(a);
  add_(x, b, 2.0);
  EXPECT_TRUE(all_close(x, add(a, mul(b, 2.0)), 0, 0));
  mul_(x, 3.0);
  div_(x, b);
  EXPECT_TRUE(all_close(x, div(mul(add(a, mul(b, 2.0)), 3.0), b), 1e-6, 0));
  Tensor y = clone(a);
  addcmul_(y, a, b, 0.5);
  EXPECT_TRUE(all_close(y, add(a, mul(mul(a, b), 0.5)), 0, 0));
  addcdiv_(y, a, b, -1.0);
  zero_(a);
  EXPECT_TRUE(all_close(a, zeros({4}), 0, 0));
  fill_(a, 2.5);
  EXPECT_TRUE(all_close(a, full({4}, 2.5), 0, 0));
  copy_(a, tensor<float>({9}));  // broadcasts
  EXPECT_TRUE(all_close(a, full({4}, 9), 0, 0));
}

TEST(Inplace, ViewsSeeTheChangeAndWritesThroughViewsReachTheBase) {
  Tensor base = zeros({2, 3});
  Tensor row = select(base, 0, 1);
  fill_(row, 7);
  EXPECT_TRUE(all_close(base, tensor<float>({0, 0, 0, 7, 7, 7}, Shape{2, 3}), 0, 0));
  Tensor alias = reshape(base, {6});
  add_(base, 1.0);
  EXPECT_EQ(alias.at<float>({5}), 8.0f);
}

TEST(Inplace, TrueInPlaceWhenNothingCanReplayFromTheOldValue) {
  Pool& pool = Pool::of(Device::cpu());
  Tensor p = tensor<float>(std::vector<float>(1024, 1.0f));  // a parameter: constant cell
  Cell* cell = &cell_of(p);
  void* buffer = cell->buffer();
  const std::size_t before = pool.resident_bytes();
  mul_(p, 0.5);
  EXPECT_EQ(&cell_of(p), cell);
  EXPECT_EQ(cell->buffer(), buffer);  // no copy
  EXPECT_EQ(pool.resident_bytes(), before);
  EXPECT_EQ(p.at<float>({3}), 0.5f);
}

TEST(Inplace, CopyOnWriteKeepsTheOldValueForReplay) {
  Pool& pool = Pool::of(Device::cpu());
  Tensor w = tensor<float>({1, 2, 3, 4});
  Tensor y = exp(w);  // y's record reads w
  Tensor expected = tensor<float>(y.to_vector<float>());
  sub_(w, ones({4}), 0.1);  // an optimizer-style update while y may still be recomputed
  EXPECT_TRUE(all_close(w, tensor<float>({0.9f, 1.9f, 2.9f, 3.9f}), 1e-7, 0));
  pool.evict(cell_of(y));
  EXPECT_TRUE(bit_equal(y, expected));  // replay read the old w
  // Once y is gone, the old value is freed.
  const std::size_t before = pool.resident_bytes();
  y = Tensor();
  EXPECT_EQ(pool.resident_bytes(), before - 2 * 16);
}

TEST(Inplace, PartialWritesCopyTheWholeOldValue) {
  Tensor base = tensor<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Tensor y = mul(base, 2.0);
  Tensor expected = tensor<float>(y.to_vector<float>(), Shape{2, 3});
  fill_(select(base, 0, 0), -1);
  Pool::of(Device::cpu()).evict(cell_of(y));
  EXPECT_TRUE(bit_equal(y, expected));
  EXPECT_TRUE(all_close(base, tensor<float>({-1, -1, -1, 4, 5, 6}, Shape{2, 3}), 0, 0));
}

TEST(Inplace, ModifyingATensorSavedForBackwardIsAClearError) {
  Tensor x = ones({3}).set_requires_grad(true);
  Tensor w = tensor<float>({1, 2, 3});
  Tensor loss = sum(mul(x, w));  // mul saves w
  {
    NoGradGuard g;
    add_(w, 1.0);
  }
  try {
    backward(loss);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified by an in-place operation"), std::string::npos)
        << e.what();
  }
}

TEST(Inplace, RejectedOnTensorsThatRequireGradInGradMode) {
  Tensor x = ones({3}).set_requires_grad(true);
  EXPECT_THROW(add_(x, 1.0), Error);
  NoGradGuard g;
  EXPECT_NO_THROW(add_(x, 1.0));
}

TEST(Inplace, ShapeAndDtypeErrorsNameTheOp) {
  Tensor x = zeros({2, 3});
  try {
    add_(x, zeros({4}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add_"), std::string::npos) << e.what();
  }
  EXPECT_THROW(add_(x, zeros({2, 3}, {.dtype = DType::Float64})), Error);
  EXPECT_THROW(add_(zeros({3}), zeros({2, 3})), Error);  // would change self's shape
}

TEST(Inplace, UnderATightBudgetUpdatesStayCorrect) {
  Pool& pool = Pool::of(Device::cpu());
  const DtrConfig saved = pool.config();
  auto run = [] {
    Tensor w = randn({64, 64}, {.seed = 11});
    w = clone(w);
    std::vector<Tensor> outs;
    for (int i = 0; i < 8; ++i) {
      outs.push_back(tanh(mul(w, 1.0 + i)));
      sub_(w, outs.back(), 0.01);
    }
    Tensor total = zeros({64, 64});
    for (auto& o : outs) total = add(total, o);
    return sum(total).item<float>();
  };
  pool.reset_stats();
  const float expected = run();
  const std::size_t peak = pool.stats().peak_resident_bytes;
  // Every old version of w stays (as a constant) while an output computed from it lives, so
  // only the outputs themselves can be evicted.
  pool.set_budget(peak * 3 / 4);
  pool.reset_stats();
  EXPECT_EQ(run(), expected);
  EXPECT_GT(pool.stats().evictions, 0u);
  pool.configure(saved);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

TEST(Inplace, OutOfBudgetDuringCopyOnWriteLeavesTheTensorIntact) {
  Pool& pool = Pool::of(Device::cpu());
  const DtrConfig saved = pool.config();
  Tensor w = tensor<float>(std::vector<float>(4096, 2.0f));  // a 16 KiB constant
  Tensor y = exp(w);                                         // a record that reads w
  pool.evict(static_cast<Cell&>(*y.storage()));
  pool.set_budget(pool.resident_bytes() + 1000);  // no room for the copy of w
  EXPECT_THROW(mul_(w, 0.5), OutOfBudget);
  pool.set_budget(std::nullopt);
  EXPECT_EQ(w.at<float>({7}), 2.0f);            // unchanged and still readable
  EXPECT_EQ(y.at<float>({7}), std::exp(2.0f));  // y still recomputes from the old w
  mul_(w, 0.5);
  EXPECT_EQ(w.at<float>({7}), 1.0f);
  pool.configure(saved);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// PyTorch's idiom: opt.step() while the step's loss (and so its graph) is still alive.  The
// records of the activations read the parameters' old values, but they are resident and smaller
// than the parameters, so they are frozen instead of each parameter being copied: the step
// peaks no higher than with the graph dropped first, and gives the same parameters.
TEST(Inplace, AStepWithTheGraphAliveCopiesNoParameter) {
  Pool& pool = Pool::of(Device::cpu());
  auto run = [&](bool graph_alive) {
    manual_seed(7);
    auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(784, 512),
                                                std::make_shared<nn::ReLU>(),
                                                std::make_shared<nn::Linear>(512, 10));
    nn::SGD opt(net->parameters(), {.lr = 0.05, .momentum = 0.9});
    Tensor x = randn({32, 784}, {.seed = 1});
    Tensor y = randint(0, 10, {32}, {.seed = 2});
    std::size_t peak = 0;  // what the updates add to the resident bytes, at most
    for (int step = 0; step < 3; ++step) {
      Tensor loss = cross_entropy(net->forward(x), y);
      opt.zero_grad();
      backward(loss);
      if (!graph_alive) loss = Tensor();
      const std::size_t before = pool.resident_bytes();
      pool.reset_peak();
      opt.step();
      peak = std::max(peak, pool.peak_resident_bytes() - before);
    }
    std::vector<Tensor> params;
    for (const auto& p : net->parameters()) params.push_back(clone(p));
    return std::make_pair(peak, params);
  };
  const auto [dropped_peak, dropped] = run(false);
  const auto [alive_peak, alive] = run(true);
  // Copying the parameters would add at least the first layer's weight, 1.5 MiB.
  EXPECT_LE(alive_peak, dropped_peak + 64 * 1024)
      << "graph alive " << alive_peak << ", dropped " << dropped_peak;
  for (std::size_t i = 0; i < alive.size(); ++i)
    EXPECT_TRUE(bit_equal(alive[i], dropped[i])) << "parameter " << i;
}

}  // namespace
}  // namespace remat
