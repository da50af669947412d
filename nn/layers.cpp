#include "nn/layers.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "nn/init.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/index.h"
#include "ops/inplace.h"
#include "ops/linalg.h"
#include "ops/norm.h"
#include "ops/softmax.h"
#include "ops/view.h"

namespace remat::nn {
namespace {

void check_floating_dtype(std::string_view layer, DType dtype) {
  REMAT_CHECK(is_floating(dtype), "{}: parameters must be float32 or float64, got {}", layer,
              dtype);
}

// PyTorch's bias initialisation for Linear and Conv2d: uniform(+-1/sqrt(fan_in)).
void init_bias_from_weight(const Tensor& weight, const Tensor& bias) {
  const std::int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  init::uniform_(bias, -bound, bound);
}

std::string shape_list(const std::vector<std::int64_t>& s) {
  return fmt::format("{}", s);
}

void check_pool_options(std::string_view layer, Size2 kernel, Size2 stride, Size2 padding,
                        Size2 dilation, std::int64_t max_padding_h, std::int64_t max_padding_w) {
  REMAT_CHECK(kernel.h > 0 && kernel.w > 0, "{}: kernel_size must be positive, got {}", layer,
              kernel);
  REMAT_CHECK(stride == Size2(0) || (stride.h > 0 && stride.w > 0),
              "{}: stride must be positive (or 0 for kernel_size), got {}", layer, stride);
  REMAT_CHECK(dilation.h > 0 && dilation.w > 0, "{}: dilation must be positive, got {}", layer,
              dilation);
  REMAT_CHECK(
      padding.h >= 0 && padding.w >= 0 && padding.h <= max_padding_h && padding.w <= max_padding_w,
      "{}: padding {} must be non-negative and at most half the kernel {}", layer, padding, kernel);
}

}  // namespace

// ---------------------------------------------------------------- Linear

Linear::Linear(LinearOptions options) : Module("Linear"), options_(options) {
  REMAT_CHECK(options_.in_features > 0 && options_.out_features > 0,
              "Linear: in_features and out_features must be positive, got {} and {}",
              options_.in_features, options_.out_features);
  check_floating_dtype("Linear", options_.dtype);
  const TensorOptions t{.dtype = options_.dtype};
  register_parameter("weight", zeros({options_.out_features, options_.in_features}, t));
  if (options_.bias) register_parameter("bias", zeros({options_.out_features}, t));
  reset_parameters();
}

void Linear::reset_parameters() {
  const Tensor w = param("weight");
  init::kaiming_uniform_(w, {.a = std::sqrt(5.0)});
  if (options_.bias) init_bias_from_weight(w, param("bias"));
}

Tensor Linear::forward(const Tensor& x) {
  REMAT_CHECK(x.defined(), "Linear: the input is an undefined tensor");
  REMAT_CHECK(x.dim() >= 1 && x.size(-1) == options_.in_features,
              "Linear(in_features={}, out_features={}): expected an input whose last dim is {}, "
              "got shape {}",
              options_.in_features, options_.out_features, options_.in_features, x.shape());
  return linear(x, param("weight"), options_.bias ? param("bias") : Tensor());
}

// ---------------------------------------------------------------- Conv2d

Conv2d::Conv2d(Conv2dOptions options) : Module("Conv2d"), options_(options) {
  const auto& o = options_;
  REMAT_CHECK(o.in_channels > 0 && o.out_channels > 0,
              "Conv2d: in_channels and out_channels must be positive, got {} and {}", o.in_channels,
              o.out_channels);
  REMAT_CHECK(o.kernel_size.h > 0 && o.kernel_size.w > 0,
              "Conv2d: kernel_size must be positive, got {}", o.kernel_size);
  REMAT_CHECK(o.stride.h > 0 && o.stride.w > 0, "Conv2d: stride must be positive, got {}",
              o.stride);
  REMAT_CHECK(o.padding.mode != Padding2::Mode::Explicit || (o.padding.h >= 0 && o.padding.w >= 0),
              "Conv2d: padding must be non-negative, got {}", o.padding);
  REMAT_CHECK(o.padding.mode != Padding2::Mode::Same || (o.stride.h == 1 && o.stride.w == 1),
              "Conv2d: padding \"same\" needs stride 1, got stride {}", o.stride);
  REMAT_CHECK(o.dilation.h > 0 && o.dilation.w > 0, "Conv2d: dilation must be positive, got {}",
              o.dilation);
  REMAT_CHECK(o.groups > 0 && o.in_channels % o.groups == 0 && o.out_channels % o.groups == 0,
              "Conv2d: groups ({}) must be positive and divide in_channels ({}) and out_channels "
              "({})",
              o.groups, o.in_channels, o.out_channels);
  check_floating_dtype("Conv2d", o.dtype);
  const TensorOptions t{.dtype = o.dtype};
  register_parameter(
      "weight",
      zeros({o.out_channels, o.in_channels / o.groups, o.kernel_size.h, o.kernel_size.w}, t));
  if (o.bias) register_parameter("bias", zeros({o.out_channels}, t));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  const Tensor w = param("weight");
  init::kaiming_uniform_(w, {.a = std::sqrt(5.0)});
  if (options_.bias) init_bias_from_weight(w, param("bias"));
}

Tensor Conv2d::forward(const Tensor& x) {
  const auto& o = options_;
  REMAT_CHECK(x.defined(), "Conv2d: the input is an undefined tensor");
  REMAT_CHECK((x.dim() == 3 || x.dim() == 4) && x.size(x.dim() - 3) == o.in_channels,
              "Conv2d(in_channels={}, out_channels={}): expected a [N, {}, H, W] or [{}, H, W] "
              "input, got shape {}",
              o.in_channels, o.out_channels, o.in_channels, o.in_channels, x.shape());
  return conv2d(
      x, param("weight"), o.bias ? param("bias") : Tensor(),
      remat::Conv2dOptions{
          .stride = o.stride, .padding = o.padding, .dilation = o.dilation, .groups = o.groups});
}

// ---------------------------------------------------------------- BatchNorm2d

BatchNorm2d::BatchNorm2d(BatchNorm2dOptions options) : Module("BatchNorm2d"), options_(options) {
  const auto& o = options_;
  REMAT_CHECK(o.num_features > 0, "BatchNorm2d: num_features must be positive, got {}",
              o.num_features);
  REMAT_CHECK(o.eps > 0 && std::isfinite(o.eps), "BatchNorm2d: eps must be positive, got {}",
              o.eps);
  REMAT_CHECK(!o.momentum || (*o.momentum >= 0 && *o.momentum <= 1),
              "BatchNorm2d: momentum must be in [0, 1], got {}", o.momentum.value_or(0));
  check_floating_dtype("BatchNorm2d", o.dtype);
  const TensorOptions t{.dtype = o.dtype};
  if (o.affine) {
    register_parameter("weight", ones({o.num_features}, t));
    register_parameter("bias", zeros({o.num_features}, t));
  }
  if (o.track_running_stats) {
    register_buffer("running_mean", zeros({o.num_features}, t));
    register_buffer("running_var", ones({o.num_features}, t));
    register_buffer("num_batches_tracked", zeros({}, {.dtype = DType::Int64}));
  }
  reset_parameters();
}

void BatchNorm2d::reset_running_stats() {
  if (!options_.track_running_stats) return;
  init::zeros_(buffer("running_mean"));
  init::ones_(buffer("running_var"));
  init::zeros_(buffer("num_batches_tracked"));
}

void BatchNorm2d::reset_parameters() {
  reset_running_stats();
  if (!options_.affine) return;
  init::ones_(param("weight"));
  init::zeros_(param("bias"));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  return forward(x, {});
}

Tensor BatchNorm2d::forward(const Tensor& x, const BatchNormEpilogue& epilogue) {
  const auto& o = options_;
  REMAT_CHECK(x.defined(), "BatchNorm2d: the input is an undefined tensor");
  REMAT_CHECK(x.dim() == 4 && x.size(1) == o.num_features,
              "BatchNorm2d(num_features={}): expected a 4-D [N, {}, H, W] input, got shape {}",
              o.num_features, o.num_features, x.shape());
  Tensor running_mean, running_var, count;
  if (o.track_running_stats) {
    running_mean = buffer("running_mean");
    running_var = buffer("running_var");
    count = buffer("num_batches_tracked");
  }
  // Without running statistics there is nothing else to normalise with: batch statistics
  // in evaluation too, as PyTorch.
  const bool use_batch_stats = is_training() || !o.track_running_stats;
  return batch_norm(x, o.affine ? param("weight") : Tensor(), o.affine ? param("bias") : Tensor(),
                    running_mean, running_var, use_batch_stats, o.momentum, o.eps, count, epilogue);
}

// ---------------------------------------------------------------- Embedding

Embedding::Embedding(EmbeddingOptions options) : Module("Embedding"), options_(options) {
  REMAT_CHECK(options_.num_embeddings > 0 && options_.embedding_dim > 0,
              "Embedding: num_embeddings and embedding_dim must be positive, got {} and {}",
              options_.num_embeddings, options_.embedding_dim);
  check_floating_dtype("Embedding", options_.dtype);
  REMAT_CHECK(!options_.padding_idx || (*options_.padding_idx >= -options_.num_embeddings &&
                                        *options_.padding_idx < options_.num_embeddings),
              "Embedding: padding_idx {} out of range for {} embeddings",
              options_.padding_idx.value_or(0), options_.num_embeddings);
  register_parameter("weight", zeros({options_.num_embeddings, options_.embedding_dim},
                                     {.dtype = options_.dtype}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(param("weight"), 0.0, 1.0);
  if (options_.padding_idx) {
    NoGradGuard no_grad;
    const std::int64_t n = options_.num_embeddings, pad = *options_.padding_idx;
    zero_(select(param("weight"), 0, pad < 0 ? pad + n : pad));
  }
}

Tensor Embedding::forward(const Tensor& indices) {
  REMAT_CHECK(indices.defined(), "Embedding: the indices are an undefined tensor");
  REMAT_CHECK(indices.dtype() == DType::Int64,
              "Embedding(num_embeddings={}, embedding_dim={}): indices must be int64, got {} "
              "(shape {})",
              options_.num_embeddings, options_.embedding_dim, indices.dtype(), indices.shape());
  if (options_.padding_idx) return embedding(param("weight"), indices, *options_.padding_idx);
  return embedding(param("weight"), indices);
}

// ---------------------------------------------------------------- LayerNorm

LayerNorm::LayerNorm(LayerNormOptions options) : Module("LayerNorm"), options_(std::move(options)) {
  const auto& o = options_;
  bool positive = !o.normalized_shape.empty();
  for (auto d : o.normalized_shape) positive = positive && d > 0;
  REMAT_CHECK(positive, "LayerNorm: normalized_shape must be non-empty with positive dims, got {}",
              shape_list(o.normalized_shape));
  REMAT_CHECK(o.eps > 0 && std::isfinite(o.eps), "LayerNorm: eps must be positive, got {}", o.eps);
  check_floating_dtype("LayerNorm", o.dtype);
  if (o.elementwise_affine) {
    register_parameter("weight", ones(o.normalized_shape, {.dtype = o.dtype}));
    register_parameter("bias", zeros(o.normalized_shape, {.dtype = o.dtype}));
  }
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (!options_.elementwise_affine) return;
  init::ones_(param("weight"));
  init::zeros_(param("bias"));
}

Tensor LayerNorm::forward(const Tensor& x) {
  const auto& o = options_;
  REMAT_CHECK(x.defined(), "LayerNorm: the input is an undefined tensor");
  const auto k = static_cast<std::int64_t>(o.normalized_shape.size());
  bool match = x.dim() >= k;
  for (std::int64_t i = 0; match && i < k; ++i)
    match = x.size(x.dim() - k + i) == o.normalized_shape[static_cast<std::size_t>(i)];
  REMAT_CHECK(match,
              "LayerNorm(normalized_shape={}): the input's trailing dims must be {}, got shape {}",
              shape_list(o.normalized_shape), shape_list(o.normalized_shape), x.shape());
  return layer_norm(x, o.normalized_shape, o.elementwise_affine ? param("weight") : Tensor(),
                    o.elementwise_affine ? param("bias") : Tensor(), o.eps);
}

// ---------------------------------------------------------------- stateless layers

Tensor ReLU::forward(const Tensor& x) {
  return relu(x);
}

LeakyReLU::LeakyReLU(double negative_slope) : Module("LeakyReLU"), negative_slope_(negative_slope) {
  REMAT_CHECK(std::isfinite(negative_slope), "LeakyReLU: negative_slope must be finite, got {}",
              negative_slope);
}
Tensor LeakyReLU::forward(const Tensor& x) {
  return leaky_relu(x, negative_slope_);
}

Tensor GELU::forward(const Tensor& x) {
  return gelu(x);
}
Tensor Sigmoid::forward(const Tensor& x) {
  return sigmoid(x);
}
Tensor Tanh::forward(const Tensor& x) {
  return tanh(x);
}
Tensor Softmax::forward(const Tensor& x) {
  return softmax(x, dim_);
}
Tensor LogSoftmax::forward(const Tensor& x) {
  return log_softmax(x, dim_);
}

MaxPool2d::MaxPool2d(MaxPool2dOptions options) : Module("MaxPool2d"), options_(options) {
  const auto& o = options_;
  check_pool_options("MaxPool2d", o.kernel_size, o.stride, o.padding, o.dilation,
                     std::min(o.kernel_size.h / 2, ((o.kernel_size.h - 1) * o.dilation.h + 1) / 2),
                     std::min(o.kernel_size.w / 2, ((o.kernel_size.w - 1) * o.dilation.w + 1) / 2));
}
Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, options_);
}

AvgPool2d::AvgPool2d(AvgPool2dOptions options) : Module("AvgPool2d"), options_(options) {
  const auto& o = options_;
  check_pool_options("AvgPool2d", o.kernel_size, o.stride, o.padding, 1, o.kernel_size.h / 2,
                     o.kernel_size.w / 2);
  REMAT_CHECK(!o.divisor_override || *o.divisor_override > 0,
              "AvgPool2d: divisor_override must be positive, got {}",
              o.divisor_override.value_or(0));
}
Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, options_);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 output_size)
    : Module("AdaptiveAvgPool2d"), output_size_(output_size) {
  REMAT_CHECK(output_size.h > 0 && output_size.w > 0,
              "AdaptiveAvgPool2d: output_size must be positive, got {}", output_size);
}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  return adaptive_avg_pool2d(x, output_size_);
}

Tensor Flatten::forward(const Tensor& x) {
  return flatten(x, start_dim_, end_dim_);
}

Dropout::Dropout(double p) : Module("Dropout"), p_(p) {
  REMAT_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got {}", p);
}
Tensor Dropout::forward(const Tensor& x) {
  return dropout(x, p_, is_training());
}

}  // namespace remat::nn
