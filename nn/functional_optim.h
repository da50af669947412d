// Optimizer steps as functions: each returns the updated parameters as new tensors with
// autograd history instead of writing in place, so a loss taken after K steps differentiates
// through all of them (unrolled optimisation: Unrolled GAN, meta-learning).  The arithmetic is
// that of nn::SGD and nn::Adam (PyTorch 1.13), written out of place.
// Usage:
//   nn::AdamState state = nn::AdamState::of(d_optimizer);   // or {} to start fresh
//   auto g = grad({loss}, params, {}, true, /*create_graph=*/true);
//   params = nn::adam_step(params, g, state, {.lr = 1e-4, .betas = {0.5, 0.999}});
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "nn/optim.h"

namespace remat::nn {

// Per-parameter momentum buffers; empty before the first step (it then starts as the gradient,
// as torch.optim.SGD).
struct SGDState {
  std::vector<Tensor> momentum_buffer;
  // Copies of what `optimizer` holds for group `group` (empty if it has not stepped).
  static SGDState of(const SGD& optimizer, std::size_t group = 0);
};

// The step count and the moment estimates, one per parameter; empty before the first step.
struct AdamState {
  std::int64_t step = 0;
  std::vector<Tensor> exp_avg, exp_avg_sq, max_exp_avg_sq;
  // Copies of what `optimizer` holds for group `group`: the unrolled steps start where the real
  // optimizer is, and leave it unchanged.  Every parameter of the group must have the same step
  // count (none, or all updated together).
  static AdamState of(const Adam& optimizer, std::size_t group = 0);
};

// params[i] - lr * update(grads[i]); momentum, dampening, Nesterov and weight decay as nn::SGD.
// Differentiable with respect to params, grads and the state.  Advances `state`.
std::vector<Tensor> sgd_step(std::span<const Tensor> params, std::span<const Tensor> grads,
                             SGDState& state, const SGDOptions& options);

// One Adam update (optionally AMSGrad and L2 weight decay), as nn::Adam.  Differentiable with
// respect to params, grads and the state.  Advances `state`.  Where a second moment is exactly
// 0 (a parameter whose gradients so far are all exactly 0), the derivative of its square root
// is taken as 0, not infinite: PyTorch's autograd would give 0 * inf = NaN there.
std::vector<Tensor> adam_step(std::span<const Tensor> params, std::span<const Tensor> grads,
                              AdamState& state, const AdamOptions& options);

}  // namespace remat::nn
