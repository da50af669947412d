// Batch and layer normalisation (PyTorch semantics): fused forward kernels, derivatives written
// with public ops so gradients of gradients work.  Weight and bias may be undefined tensors.
// Usage: y = batch_norm(x, w, b, running_mean, running_var, /*training=*/true);
//        y = batch_norm(x, w, b, mean, var, true, std::nullopt, 1e-5, num_batches_tracked);
//        y = layer_norm(x, {512}, w, b);
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace remat {

// Normalises x ([N, C, ...], rank >= 2) per channel (dim 1).  Training: with the batch
// statistics, then (when the running statistics are defined) updates running_mean/running_var
// in place to (1 - momentum) * running + momentum * batch statistic (the variance unbiased, as
// PyTorch); that update is separate in-place ops outside the output's record and graph.
// num_batches_tracked, when defined (an int64 scalar), counts the training calls; momentum
// std::nullopt (PyTorch's momentum=None) makes the statistics a cumulative average over them,
// momentum 1 / num_batches_tracked, and then needs the counter.
// Evaluation: with the running statistics, which must then be defined.
// The epilogue, when given, follows the normalisation: y = relu(bn(x) + residual), in the same
// pass over x in training (a ResNet block's tail as one op, whose derivative applies the ReLU's
// mask in its own call: the masked gradient is also the residual's, and no call holds more than
// three full-size tensors), as separate ops in evaluation.
struct BatchNormEpilogue {
  Tensor residual;  // undefined, or of x's shape and dtype
  bool relu = false;
};
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  std::optional<double> momentum = 0.1, double eps = 1e-5,
                  const Tensor& num_batches_tracked = Tensor(),
                  const BatchNormEpilogue& epilogue = {});

// Normalises over the trailing dims given by normalized_shape (which must match x's last dims);
// weight and bias, when defined, have shape normalized_shape.
Tensor layer_norm(const Tensor& x, const std::vector<std::int64_t>& normalized_shape,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);

}  // namespace remat
