// Order statistics along one dim, as PyTorch's.
// Usage: auto [values, indices] = topk(logits, 5);  topk(x, 2, 0, /*largest=*/false);
#pragma once
#include <cstdint>
#include <utility>

#include "core/tensor.h"

namespace remat {

// The k largest (or smallest) elements of t along dim and their int64 indices, as torch.topk:
// sorted from the extreme inward (NaN counts as larger than every number), equal values in
// index order.  Values are differentiable to any order (gradients flow to the picked elements).
// sorted = false is accepted for PyTorch's signature; the result is sorted either way.
std::pair<Tensor, Tensor> topk(const Tensor& t, std::int64_t k, std::int64_t dim = -1,
                               bool largest = true, bool sorted = true);

}  // namespace remat
