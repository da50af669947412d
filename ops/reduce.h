// Reductions over dims, with keepdim as in PyTorch.  An empty dims list reduces every dim.
// Usage: auto m = mean(x, {0, 2, 3}, /*keepdim=*/true); auto [v, i] = max(x, 1);
#pragma once
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace remat {

Tensor sum(const Tensor& t, std::vector<std::int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& t, std::vector<std::int64_t> dims = {}, bool keepdim = false);
// Variance with Bessel's correction by default (correction = 1), as torch.var.
Tensor var(const Tensor& t, std::vector<std::int64_t> dims = {}, std::int64_t correction = 1,
           bool keepdim = false);
// Maximum / minimum along one dim: (values, int64 indices of the first extreme element).
std::pair<Tensor, Tensor> max(const Tensor& t, std::int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& t, std::int64_t dim, bool keepdim = false);
// Over all elements: a 0-dim tensor; ties share the gradient equally.
Tensor max(const Tensor& t);
Tensor min(const Tensor& t);
Tensor argmax(const Tensor& t, std::int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& t, std::int64_t dim, bool keepdim = false);

// Running sum along dim, as torch.cumsum (differentiable to any order).
Tensor cumsum(const Tensor& t, std::int64_t dim);
// Vector p-norm over dims (all when empty), as torch.linalg.vector_norm: p = 2 by default,
// 0 (nonzero count), 1, any p > 0, or +-infinity (largest / smallest magnitude).
// Differentiable to any order; at a zero norm the gradient is 0, as PyTorch's.
Tensor norm(const Tensor& t, double p = 2, std::vector<std::int64_t> dims = {},
            bool keepdim = false);
// log(sum(exp(t), dim)), computed stably, as torch.logsumexp.
Tensor logsumexp(const Tensor& t, std::int64_t dim, bool keepdim = false);

// Sums a broadcast gradient back to `shape` (the inverse of broadcasting to t's shape).
Tensor sum_to(const Tensor& t, const Shape& shape);

}  // namespace remat
