// Softmax and log-softmax along one dim: fused, numerically stable (max-subtracted) kernels whose
// derivatives are written with public ops, so gradients of gradients work.
// Usage: auto p = softmax(logits, 1); auto lp = log_softmax(logits, -1);
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace remat {

Tensor softmax(const Tensor& x, std::int64_t dim);
Tensor log_softmax(const Tensor& x, std::int64_t dim);

}  // namespace remat
