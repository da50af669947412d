// Loss functions with PyTorch semantics (torch.nn.functional): cross entropy with class weights,
// ignore_index and label smoothing, NLL, MSE and numerically stable BCE with logits.
// Usage: auto loss = cross_entropy(logits, labels, {.label_smoothing = 0.1});
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace remat {

enum class Reduction { None, Mean, Sum };

struct NllLossOptions {
  Reduction reduction = Reduction::Mean;
  std::int64_t ignore_index = -100;  // targets equal to it contribute nothing
  Tensor weight{};                   // optional [C] class weights; must not require grad
};

struct CrossEntropyOptions {
  Reduction reduction = Reduction::Mean;
  std::int64_t ignore_index = -100;
  double label_smoothing = 0.0;  // in [0, 1]
  Tensor weight{};               // optional [C] class weights; must not require grad
};

// logits [N, C] or [N, C, d1, ...] (or unbatched [C]) and int64 class indices [N] or
// [N, d1, ...] (or []).  Mean divides by the summed weights of the targets not ignored.
// Floating targets of the logits' shape are class probabilities (mean over examples).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     const CrossEntropyOptions& options = {});
// The same layout, with log-probabilities as input.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const NllLossOptions& options = {});
// (input - target)^2; both of the same shape and dtype.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// max(x, 0) - x * t + log(1 + exp(-|x|)); targets are probabilities of logits' shape.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        Reduction reduction = Reduction::Mean);
struct BceWithLogitsOptions {
  Reduction reduction = Reduction::Mean;
  Tensor weight{};      // optional, broadcast to the logits: rescales each element's loss
  Tensor pos_weight{};  // optional, broadcast to the logits (e.g. [C]): weight of positive targets
};
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        const BceWithLogitsOptions& options);

}  // namespace remat
