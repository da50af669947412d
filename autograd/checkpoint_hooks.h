// What the dispatch path (ops/dispatch.cpp) tells the checkpoint machinery about each op call,
// so a checkpoint can count calls, note which inputs its recompute code reads, fill the saved
// tensors its replay recreates, and keep a replay from repeating side effects.
#pragma once
#include <span>
#include <string_view>

#include "core/tensor.h"

namespace remat::detail {

// True while a checkpoint records or replays on this thread; the hooks below are for then.
bool checkpoint_active();
// Before a kernel runs (not for views): the inputs it reads.
void on_kernel_inputs(std::span<const Tensor> inputs);
// After an op call (or a new constant), before its autograd node is recorded.
void on_op_outputs(std::span<const Tensor> outputs, bool is_view, double seconds);
// During a replay, in-place writes to tensors that existed before the replay began are side
// effects of the forward (batch-norm running statistics): true when `self` is one, and the
// write must be skipped.
bool skip_inplace(const Tensor& self);

}  // namespace remat::detail
