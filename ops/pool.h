// 2-D pooling over NCHW (or unbatched CHW) tensors as torch.nn.functional: max (-inf padding,
// argmax indices), average and adaptive average.  Usage: adaptive_avg_pool2d(x, 1);
// auto y = max_pool2d(x, {.kernel_size = 3, .stride = 2, .padding = 1}); avg_pool2d(x, 2, 2);
#pragma once
#include <optional>
#include <utility>

#include "core/tensor.h"
#include "ops/conv.h"  // Size2

namespace remat {

// A stride of 0 (the default) means kernel_size, as PyTorch's stride=None.
struct MaxPool2dOptions {
  Size2 kernel_size;
  Size2 stride = 0;
  Size2 padding = 0;  // -inf padding, at most half the (dilated) kernel
  Size2 dilation = 1;
  bool ceil_mode = false;
};

struct AvgPool2dOptions {
  Size2 kernel_size;
  Size2 stride = 0;
  Size2 padding = 0;  // zero padding, at most half the kernel
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<std::int64_t> divisor_override = std::nullopt;
};

Tensor max_pool2d(const Tensor& x, const MaxPool2dOptions& opts);
// Positional form; two-argument calls take the options struct.
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding = 0,
                  Size2 dilation = 1, bool ceil_mode = false);
// Values and int64 indices of each maximum within its input plane (h * W + w), as PyTorch's
// return_indices=True.  NaN counts as the maximum.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const MaxPool2dOptions& opts);

Tensor avg_pool2d(const Tensor& x, const AvgPool2dOptions& opts);
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding = 0,
                  bool count_include_pad = true);

// Averages over windows [floor(i * H / OH), ceil((i + 1) * H / OH)) so any input size maps to
// output_size.
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size);

}  // namespace remat
