// The linear chain of the DTR paper's sqrt(N) bound: one link y = x / 2 + 1 of 4 KiB tensors,
// and its backward, which reads the incoming gradient and the link's input as a layer would.
// User code, written through the same public Op registration as the framework's own ops;
// examples/dtr_chain runs it, and the simulator's tests trace the same graph.
// Usage: Tensor y = call1(chain_op(), {x});
#pragma once
#include <memory>

#include "ops/op.h"
#include "remat.h"

namespace remat::examples {

constexpr std::int64_t kElements = 1024;  // each tensor is 4 KiB

// Backward of one link.  It has no derivative of its own: differentiating through it twice is an
// error naming chain_grad.
class ChainGradOp final : public Op {
 public:
  std::string_view name() const override { return "chain_grad"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override { return {in[0]}; }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const float* g = in[0].data<float>();
    const float* x = in[1].data<float>();
    float* y = out[0].data<float>();
    for (std::int64_t i = 0; i < kElements; ++i) y[i] = g[i] * (0.5f + 0.0f * x[i]);
  }
};

// One link of the chain: y = x / 2 + 1.
class ChainOp final : public Op {
 public:
  std::string_view name() const override { return "chain"; }
  SaveSpec saves() const override { return {0b1, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override { return {in[0]}; }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    for (std::int64_t i = 0; i < kElements; ++i) y[i] = 0.5f * x[i] + 1.0f;
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    static const auto grad_op = std::make_shared<ChainGradOp>();
    return {call1(grad_op, {c.grad(0), c.input(0)})};
  }
};

inline const std::shared_ptr<const Op>& chain_op() {
  static const std::shared_ptr<const Op> op = std::make_shared<ChainOp>();
  return op;
}

}  // namespace remat::examples
