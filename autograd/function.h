// The derivative an op gives the autograd graph.  A node calls it without knowing which op it
// belongs to; the op writes it with public, differentiable ops, so gradients of gradients work.
#pragma once
#include <span>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace remat {

struct BackwardContext {
  std::span<Tensor> grad_outputs;           // one per forward output; zeros where none flowed
  std::span<const Tensor> saved_inputs;     // undefined where the op did not ask to save
  std::span<const Tensor> saved_outputs;    // likewise
  std::span<const bool> needs_input_grad;   // false where the input needs no gradient
  std::span<const TensorMeta> input_metas;  // always kept: shapes for reducing broadcasts

  const Tensor& grad(std::size_t i) const { return grad_outputs[i]; }
  // Moves gradient i out, so a backward that is done with it (its first op consumed it) does
  // not hold it, resident, through the rest of its calls; grad(i) is undefined afterwards.
  Tensor take_grad(std::size_t i) const { return std::move(grad_outputs[i]); }
  const Tensor& input(std::size_t i) const { return saved_inputs[i]; }
  const Tensor& output(std::size_t i) const { return saved_outputs[i]; }
  bool needs(std::size_t i) const { return needs_input_grad[i]; }
  const TensorMeta& input_meta(std::size_t i) const { return input_metas[i]; }
};

class BackwardFunction {
 public:
  virtual ~BackwardFunction() = default;
  virtual std::string_view name() const = 0;
  // One gradient per forward input (undefined where not needed), each shaped like its input.
  virtual std::vector<Tensor> backward(const BackwardContext& ctx) const = 0;
};

// The few tensor operations the engine itself needs (summing gradients that meet, zero
// gradients for outputs nothing flowed into); ops/ installs them, so autograd names no op.
struct EngineOps {
  Tensor (*add)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*zeros)(const TensorMeta&) = nullptr;
  Tensor (*ones)(const TensorMeta&) = nullptr;
};
void set_engine_ops(EngineOps ops);
const EngineOps& engine_ops();

}  // namespace remat
