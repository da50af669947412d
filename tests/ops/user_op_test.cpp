// Ops written by users through the public Op class: whatever metadata infer returns, kernels get
// contiguous, offset-0 outputs; and derivatives through an op without one are errors naming it,
// never gradients with a term silently missing.
#include "ops/op.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

// y = 2x, with infer returning its input's metadata as is (strides and offset of a view).
class TwiceGradOp final : public Op {
 public:
  std::string_view name() const override { return "twice_grad"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override { return {in[0]}; }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const std::int64_t n = in[0].meta->numel();
    for (std::int64_t i = 0; i < n; ++i) out[0].data<double>()[i] = 2 * in[0].data<double>()[i];
  }
};

class TwiceOp final : public Op {
 public:
  std::string_view name() const override { return "twice"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in[0].is_contiguous() && in[0].dtype == DType::Float64,
                "twice: contiguous float64 input");
    return {in[0]};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const std::int64_t n = in[0].meta->numel();
    const double* x = in[0].data<double>();
    for (std::int64_t i = 0; i < n; ++i) out[0].data<double>()[i] = 2 * x[i];
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    static const auto grad_op = std::make_shared<TwiceGradOp>();
    return {call1(grad_op, {c.grad(0)})};
  }
};

// The same op with no derivative at all.
class NoGradOp final : public Op {
 public:
  std::string_view name() const override { return "no_grad_op"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override { return {in[0]}; }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    for (std::int64_t i = 0; i < in[0].meta->numel(); ++i)
      out[0].data<double>()[i] = in[0].data<double>()[i];
  }
};

Tensor twice(const Tensor& x) {
  static const auto op = std::make_shared<TwiceOp>();
  return call1(op, {x});
}

TEST(UserOp, OutputsOfAViewInputAreFreshContiguousBuffers) {
  // A contiguous row of a [4, 8] tensor: offset 24, so an output with the input's metadata would
  // be written 24 elements past the start of its 8-element buffer.
  Tensor x = reshape(arange(0, 32, 1, {.dtype = DType::Float64}), {4, 8});
  Tensor row = select(x, 0, 3);
  ASSERT_EQ(row.offset(), 24);
  Tensor y = twice(row);
  EXPECT_EQ(y.offset(), 0);
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_TRUE(testing::bit_equal(y, mul(row, 2.0)));
  // And a transposed (non-contiguous) input through an op that reads it as strided metadata.
  static const auto grad_op = std::make_shared<TwiceGradOp>();
  Tensor col = select(transpose(x, 0, 1), 0, 5);
  Tensor z = call1(grad_op, {contiguous(col)});
  EXPECT_EQ(z.offset(), 0);
  EXPECT_TRUE(testing::bit_equal(z, mul(col, 2.0)));
}

TEST(UserOp, DifferentiatingThroughAnOpWithoutDerivativeNamesIt) {
  Tensor w = tensor<double>({1, 2, 3}).set_requires_grad(true);
  // First derivatives work: the derivative of twice is written with twice_grad.
  Tensor y = twice(w);
  Tensor g = grad({sum(mul(y, y))}, {w}, {}, false, true)[0];
  EXPECT_TRUE(testing::bit_equal(g, tensor<double>({8, 16, 24})));
  // d/dw [sum(g) + sum(w^2)] would be 8 + 2w = [10, 12, 14]; the term through twice_grad needs
  // its derivative, which it does not have.  An error naming it, not [2, 4, 6].
  EXPECT_TRUE(throws_with([&] { grad({add(sum(g), sum(mul(w, w)))}, {w}); },
                          {"op twice_grad has no derivative"}));
  // A missing first derivative says the same.
  static const auto none = std::make_shared<NoGradOp>();
  Tensor v = call1(none, {w});
  EXPECT_TRUE(v.requires_grad());
  EXPECT_TRUE(throws_with([&] { backward(sum(v)); }, {"op no_grad_op has no derivative"}));
}

TEST(UserOp, ZeroDerivativeOpsCarryNoHistory) {
  Tensor w = tensor<double>({1, -2, 3}).set_requires_grad(true);
  EXPECT_FALSE(gt(w, 0.0).requires_grad());
  EXPECT_FALSE(sign(w).requires_grad());
  // Gradients flow around them, as in PyTorch.
  backward(sum(mul(w, gt(w, 0.0))));
  EXPECT_TRUE(testing::bit_equal(w.grad(), tensor<double>({1, 0, 1})));
}

}  // namespace
}  // namespace remat
