// The autograd engine: accumulation into leaves, grad() with and without create_graph, graph
// release, grad mode, and long graphs.  Closed forms are the reference.
#include "dtr/pool.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;

TEST(Autograd, BackwardAccumulatesIntoLeaves) {
  Tensor x = tensor<double>({1, 2, 3}, std::nullopt, true);
  backward(sum(mul(x, x)));  // d/dx sum(x^2) = 2x
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({2, 4, 6}), 0, 0));
  backward(sum(mul(x, 3.0)));  // accumulates: 2x + 3
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({5, 7, 9}), 0, 0));
  EXPECT_FALSE(x.grad().requires_grad());
}

TEST(Autograd, TensorUsedTwiceSumsGradients) {
  Tensor x = tensor<double>({2}, std::nullopt, true);
  Tensor y = add(mul(x, x), exp(x));  // 2x + e^x
  backward(sum(y));
  EXPECT_NEAR(x.grad().at<double>({0}), 4 + std::exp(2.0), 1e-12);
}

TEST(Autograd, GradDoesNotTouchLeafGrads) {
  Tensor x = tensor<double>({1, 2}, std::nullopt, true);
  Tensor y = sum(pow(x, 3.0));
  auto g = grad({y}, {x});
  EXPECT_TRUE(all_close(g[0], tensor<double>({3, 12}), 1e-12, 0));
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, SecondAndThirdDerivativesOfACubic) {
  Tensor x = tensor<double>({1.5, -2}, std::nullopt, true);
  Tensor y = sum(pow(x, 3.0));
  auto g1 = grad({y}, {x}, {}, true, true);          // 3x^2
  ASSERT_TRUE(g1[0].requires_grad());
  auto g2 = grad({sum(g1[0])}, {x}, {}, true, true);  // 6x
  auto g3 = grad({sum(g2[0])}, {x});                  // 6
  EXPECT_TRUE(all_close(g1[0], tensor<double>({6.75, 12}), 1e-12, 0));
  EXPECT_TRUE(all_close(g2[0], tensor<double>({9, -12}), 1e-12, 0));
  EXPECT_TRUE(all_close(g3[0], tensor<double>({6, 6}), 1e-12, 0));
}

TEST(Autograd, BackwardWithCreateGraphBuildsDifferentiableGrads) {
  Tensor x = tensor<double>({0.5}, std::nullopt, true);
  backward({sum(exp(mul(x, 2.0)))}, {}, false, true);  // grad = 2 e^{2x}
  Tensor g = x.grad();
  ASSERT_TRUE(g.requires_grad());
  auto gg = grad({sum(g)}, {x});  // 4 e^{2x}
  EXPECT_NEAR(gg[0].item<double>(), 4 * std::exp(1.0), 1e-12);
}

TEST(Autograd, SecondBackwardWithoutRetainGraphIsAClearError) {
  Tensor x = tensor<double>({1, 2}, std::nullopt, true);
  Tensor y = sum(exp(x));
  backward(y);
  try {
    backward(y);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
  Tensor z = sum(exp(x));
  backward({z}, {}, true);
  EXPECT_NO_THROW(backward(z));
}

TEST(Autograd, SavedTensorsAreReleasedAsTheGraphIsConsumed) {
  Pool& pool = Pool::of(Device::cpu());
  Tensor x = ones({1024}, {.dtype = DType::Float64, .requires_grad = true});
  Tensor loss;
  std::size_t before;
  {
    Tensor y = exp(x);  // saves its output: 8 KiB held only by the graph after this scope
    loss = sum(y);
    before = pool.resident_bytes();
  }
  EXPECT_EQ(pool.resident_bytes(), before);  // the node still holds y
  backward(loss);
  // y's cell was released by its node; x.grad (8 KiB) was added.
  EXPECT_EQ(pool.resident_bytes(), before - 8192 + 8192);
  Tensor probe = x.grad();
  probe = Tensor();
  x.set_grad(Tensor());
  EXPECT_EQ(pool.resident_bytes(), before - 8192);
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = ones({2}).set_requires_grad(true);
  Tensor y;
  {
    NoGradGuard guard;
    y = mul(x, 2.0);
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(mul(x, 2.0).requires_grad());
}

TEST(Autograd, DetachCutsHistoryAndSharesTheCell) {
  Tensor x = ones({2}).set_requires_grad(true);
  Tensor y = mul(x, 2.0);
  Tensor d = detach(y);
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.shares_storage_with(y));
}

TEST(Autograd, ErrorsForBadCalls) {
  Tensor x = ones({3}).set_requires_grad(true);
  Tensor y = mul(x, 2.0);
  EXPECT_THROW(backward(y), Error);  // non-scalar without grad_outputs
  Tensor unused = ones({1}).set_requires_grad(true);
  EXPECT_THROW(grad({sum(y)}, {unused}), Error);
  auto g = grad({sum(mul(x, 2.0))}, {unused}, {}, false, false, /*allow_unused=*/true);
  EXPECT_FALSE(g[0].defined());
  EXPECT_THROW(y.set_requires_grad(false), Error);       // not a leaf
  EXPECT_THROW(arange(0, 3).set_requires_grad(), Error);  // int64
}

TEST(Autograd, LongChainsNeitherRecurseNorOverflow) {
  Tensor x = ones({4}, {.dtype = DType::Float64, .requires_grad = true});
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = add(y, 1e-3);
  backward(sum(y));
  EXPECT_TRUE(all_close(x.grad(), ones({4}, {.dtype = DType::Float64}), 0, 0));
  y = Tensor();  // destroying the 20,000-node graph must not overflow the stack
}

TEST(Autograd, GradOutputsWeightTheBackward) {
  Tensor x = tensor<double>({1, 2}, std::nullopt, true);
  Tensor y = mul(x, 3.0);
  backward({y}, {tensor<double>({1, 10})});
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({3, 30}), 0, 0));
}

}  // namespace
}  // namespace remat
