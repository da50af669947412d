// An op in one place: its shape rule, its kernel per device, and its derivative written with
// public ops.  Attributes are members, so an Op object with its inputs is a replayable record.
// Adding an op: derive from Op, implement infer/cpu/backward, and expose a public function that
// checks its arguments and calls `call` (see ops/elementwise.cpp for examples).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "autograd/function.h"
#include "core/small_vector.h"
#include "core/tensor.h"
#include "dtr/producer.h"

namespace remat {

// Which inputs and outputs the derivative reads (bit i set: keep input/output i).
struct SaveSpec {
  std::uint32_t inputs = 0;
  std::uint32_t outputs = 0;
};

class Op : public Producer, public BackwardFunction {
 public:
  std::string_view name() const override = 0;
  // Validates the input metadata (throwing an error that names the op and the shapes) and
  // returns the outputs' shapes, dtypes and devices.  Kernels always receive contiguous,
  // offset-0 outputs (strides and offsets returned here are replaced), except for view ops.
  virtual std::vector<TensorMeta> infer(std::span<const TensorMeta> inputs) const = 0;
  virtual void cpu(std::span<const KernelArg> inputs, std::span<const KernelArg> outputs) const = 0;
  virtual void cuda(std::span<const KernelArg> inputs, std::span<const KernelArg> outputs) const;

  // Autograd.  The default derivative throws "op NAME has no derivative" when something computed
  // through the op is differentiated (an op used only inside other ops' derivatives, say).
  std::vector<Tensor> backward(const BackwardContext& ctx) const override;
  // True when the derivative is zero wherever it exists (comparisons, sign, argmax, random
  // draws): outputs then carry no autograd history, as in PyTorch.  Never say so to skip
  // writing a derivative: gradients of gradients would silently lose terms.
  virtual bool zero_derivative() const { return false; }
  virtual SaveSpec saves() const { return {}; }

  // A view op's outputs (one, or several as unbind's) alias input 0's cell through the metadata
  // infer returns; no kernel runs and nothing is allocated.
  virtual bool is_view() const { return false; }
  // True when the outputs are not to be recomputed by the cache but kept as constants (device
  // copies: their input lives in another device's pool).
  virtual bool makes_constants() const { return false; }
  // Deterministic cost in floating-point operations, for cost models and benchmarks.
  virtual double flops(std::span<const TensorMeta> inputs,
                       std::span<const TensorMeta> outputs) const;

  void execute(std::span<const KernelArg> inputs, std::span<const KernelArg> outputs) const final;
};

// The one dispatch path for every op call, forward or backward, user's or replay's.  Inputs
// are a span (a braced list stays on the stack); outputs come back in `outputs`.
void call_into(const std::shared_ptr<const Op>& op, std::span<const Tensor> inputs,
               SmallVector<Tensor, 2>& outputs);
std::vector<Tensor> call(const std::shared_ptr<const Op>& op, std::span<const Tensor> inputs);
inline std::vector<Tensor> call(const std::shared_ptr<const Op>& op,
                                std::initializer_list<Tensor> inputs) {
  return call(op, std::span<const Tensor>(inputs.begin(), inputs.size()));
}
// An op with one output.
Tensor call1(const std::shared_ptr<const Op>& op, std::span<const Tensor> inputs);
inline Tensor call1(const std::shared_ptr<const Op>& op, std::initializer_list<Tensor> inputs) {
  return call1(op, std::span<const Tensor>(inputs.begin(), inputs.size()));
}
// The in-place variant: op reads {self, others...} and writes its one output through self's
// view into self's cell (see ops/inplace.h for the copy-on-write rule).
void call_inplace(std::shared_ptr<const Op> op, const Tensor& self, std::vector<Tensor> others);
// Several written tensors at once (an optimizer's parameter and its moments): the kernel reads
// {targets..., others...} and writes one output per target, through that target's view.  The
// targets must not share storage.  The same copy-on-write rule applies to each target.
void call_inplace(const std::shared_ptr<const Op>& op, std::span<const Tensor> targets,
                  std::span<const Tensor> others);

// A tensor of the given data, stored in a constant cell of `device`'s pool.
Tensor constant_from_bytes(const void* data, TensorMeta meta);

}  // namespace remat
