// Fused optimizer updates: one in-place op per parameter that reads the gradient once and
// writes the parameter and its state buffers in one pass, instead of a chain of in-place ops
// (eight passes over the parameter's bytes for Adam).  The arithmetic per element is
// torch.optim's single-tensor Adam/AdamW and SGD in the parameter's dtype.  Contiguous tensors
// of one shape and dtype only; nn/optim.cpp keeps the op chain for anything else.
// Usage: { NoGradGuard g; adam_step_(p, m, v, Tensor(), grad, {.lr = 1e-3, ...}); }
#pragma once
#include "core/tensor.h"

namespace remat {

struct AdamStepParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;  // AdamW: the parameter decays by lr * weight_decay first
  std::int64_t step = 1;   // 1 at the first update: bias corrections 1 - beta^step
};

// Whether the fused ops take these tensors (all defined ones contiguous, one shape and dtype).
bool fused_step_applies(std::initializer_list<Tensor> tensors);

// param, exp_avg, exp_avg_sq (and max_exp_avg_sq for amsgrad; undefined otherwise) are updated
// in place from grad.
void adam_step_(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& max_exp_avg_sq, const Tensor& grad, const AdamStepParams& p);

struct SgdStepParams {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

// param (and momentum_buffer, when momentum is non-zero; it must already hold the first
// step's value, as torch.optim.SGD's clone of the gradient) are updated in place from grad.
void sgd_step_(const Tensor& param, const Tensor& momentum_buffer, const Tensor& grad,
               const SgdStepParams& p);

}  // namespace remat
