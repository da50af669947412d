// Gradient clipping as torch.nn.utils.clip_grad_norm_: scales every gradient in place so that
// their total norm is at most max_norm.
// Usage: backward(loss); nn::clip_grad_norm_(model->parameters(), 1.0); opt.step();
#pragma once
#include <vector>

#include "core/tensor.h"

namespace remat::nn {

// The total `norm_type`-norm of the parameters' gradients (those that have one), taken as if
// they were one vector; when it exceeds max_norm every gradient is multiplied by
// max_norm / (total + 1e-6).  Returns the total norm before clipping.  norm_type is a positive
// number or infinity (the largest absolute value).
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0);

}  // namespace remat::nn
