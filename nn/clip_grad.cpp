#include "nn/clip_grad.h"

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/reduce.h"

namespace remat::nn {

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  REMAT_CHECK(max_norm >= 0 && std::isfinite(max_norm),
              "clip_grad_norm_: max_norm must be finite and >= 0, got {}", max_norm);
  REMAT_CHECK(norm_type > 0, "clip_grad_norm_: norm_type must be positive (or infinity), got {}",
              norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const auto& p : parameters)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0;
  const bool inf = std::isinf(norm_type);
  double total = 0;
  for (const auto& g : grads) {
    // Accumulated in double, as the per-tensor norms are, whatever the gradients' dtype.
    const Tensor a = abs(to_dtype(g, DType::Float64));
    if (inf)
      total = std::max(total, max(a).item<double>());
    else
      total += sum(pow(a, norm_type)).item<double>();
  }
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1)
    for (const auto& g : grads) mul_(g, coef);
  return total;
}

}  // namespace remat::nn
