// The standard layers as nn::Module subclasses, with options structs and PyTorch's default
// initialisation (from the default generator: manual_seed(s) first makes a model reproducible).
// Usage: auto fc = std::make_shared<nn::Linear>(784, 10);
//        auto conv = std::make_shared<nn::Conv2d>(nn::Conv2dOptions{
//            .in_channels = 3, .out_channels = 16, .kernel_size = 3, .padding = 1});
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "nn/module.h"
#include "ops/conv.h"  // Size2
#include "ops/norm.h"  // BatchNormEpilogue
#include "ops/pool.h"  // MaxPool2dOptions, AvgPool2dOptions

namespace remat::nn {

// ---------------------------------------------------------------- layers with parameters
// Each reads its parameters through param()/buffer() in forward, so functional_call can
// substitute them; reset_parameters() draws PyTorch's default initialisation anew.

struct LinearOptions {
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  bool bias = true;
  DType dtype = DType::Float32;
};

// y = x W^T + b over the last dim.  weight [out, in]: kaiming_uniform(a = sqrt(5)), i.e.
// uniform(+-1/sqrt(in)); bias [out]: uniform(+-1/sqrt(in)).
class Linear : public Module {
 public:
  explicit Linear(LinearOptions options);
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true)
      : Linear(LinearOptions{
            .in_features = in_features, .out_features = out_features, .bias = bias}) {}
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  const LinearOptions& options() const { return options_; }

 private:
  LinearOptions options_;
};

// nn::Conv2dOptions describes the layer; remat::Conv2dOptions (ops/conv.h) the op's attributes.
struct Conv2dOptions {
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  Size2 kernel_size = 0;
  Size2 stride = 1;
  Padding2 padding = 0;  // zeros on both sides, or "same" / "valid" (ops/conv.h)
  Size2 dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
  DType dtype = DType::Float32;
};

// NCHW convolution.  weight [out, in/groups, kh, kw]: kaiming_uniform(a = sqrt(5)); bias [out]:
// uniform(+-1/sqrt(fan_in)), fan_in = in/groups * kh * kw.
class Conv2d : public Module {
 public:
  explicit Conv2d(Conv2dOptions options);
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, Size2 kernel_size, Size2 stride = 1,
         Padding2 padding = 0, bool bias = true)
      : Conv2d(Conv2dOptions{.in_channels = in_channels,
                             .out_channels = out_channels,
                             .kernel_size = kernel_size,
                             .stride = stride,
                             .padding = padding,
                             .bias = bias}) {}
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  const Conv2dOptions& options() const { return options_; }

 private:
  Conv2dOptions options_;
};

struct BatchNorm2dOptions {
  std::int64_t num_features = 0;
  double eps = 1e-5;
  // Weight of the newest batch statistic in the running average; none: a cumulative average
  // over all batches seen (num_batches_tracked), as PyTorch's momentum=None.
  std::optional<double> momentum = 0.1;
  bool affine = true;  // learnable weight (1) and bias (0)
  // Buffers running_mean (0), running_var (1) and num_batches_tracked (int64, 0); without them
  // the layer normalises with batch statistics in evaluation too.
  bool track_running_stats = true;
  DType dtype = DType::Float32;
};

// Per-channel normalisation of [N, C, H, W].  In training (is_training()) it uses the batch
// statistics and updates the running buffers in place; in evaluation the running statistics.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(BatchNorm2dOptions options);
  explicit BatchNorm2d(std::int64_t num_features)
      : BatchNorm2d(BatchNorm2dOptions{.num_features = num_features}) {}
  Tensor forward(const Tensor& x) override;
  // relu(bn(x) + residual) in one op when training (ops/norm.h): a ResNet block's tail.
  Tensor forward(const Tensor& x, const BatchNormEpilogue& epilogue);
  void reset_parameters();     // weight 1, bias 0, and reset_running_stats()
  void reset_running_stats();  // mean 0, var 1, num_batches_tracked 0
  const BatchNorm2dOptions& options() const { return options_; }

 private:
  BatchNorm2dOptions options_;
};

struct EmbeddingOptions {
  std::int64_t num_embeddings = 0;
  std::int64_t embedding_dim = 0;
  DType dtype = DType::Float32;
  // That row starts as zeros and gets no gradient (torch.nn.Embedding's padding_idx).
  std::optional<std::int64_t> padding_idx = std::nullopt;
};

// A lookup table: forward(int64 indices of any shape) gives indices.shape + [embedding_dim].
// weight [num_embeddings, embedding_dim]: normal(0, 1).
class Embedding : public Module {
 public:
  explicit Embedding(EmbeddingOptions options);
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim)
      : Embedding(
            EmbeddingOptions{.num_embeddings = num_embeddings, .embedding_dim = embedding_dim}) {}
  Tensor forward(const Tensor& indices) override;
  void reset_parameters();
  const EmbeddingOptions& options() const { return options_; }

 private:
  EmbeddingOptions options_;
};

struct LayerNormOptions {
  std::vector<std::int64_t> normalized_shape;  // the trailing dims normalised over
  double eps = 1e-5;
  bool elementwise_affine = true;  // weight (1) and bias (0) of shape normalized_shape
  DType dtype = DType::Float32;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(LayerNormOptions options);
  explicit LayerNorm(std::vector<std::int64_t> normalized_shape, double eps = 1e-5,
                     bool elementwise_affine = true)
      : LayerNorm(LayerNormOptions{.normalized_shape = std::move(normalized_shape),
                                   .eps = eps,
                                   .elementwise_affine = elementwise_affine}) {}
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  const LayerNormOptions& options() const { return options_; }

 private:
  LayerNormOptions options_;
};

// ---------------------------------------------------------------- layers without parameters

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01);
  Tensor forward(const Tensor& x) override;
  double negative_slope() const { return negative_slope_; }

 private:
  double negative_slope_;
};

// The exact form x * Phi(x), PyTorch's default.
class GELU : public Module {
 public:
  GELU() : Module("GELU") {}
  Tensor forward(const Tensor& x) override;
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

class Softmax : public Module {
 public:
  explicit Softmax(std::int64_t dim) : Module("Softmax"), dim_(dim) {}
  Tensor forward(const Tensor& x) override;
  std::int64_t dim() const { return dim_; }

 private:
  std::int64_t dim_;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(std::int64_t dim) : Module("LogSoftmax"), dim_(dim) {}
  Tensor forward(const Tensor& x) override;
  std::int64_t dim() const { return dim_; }

 private:
  std::int64_t dim_;
};

// Options as ops/pool.h: a stride of 0 means kernel_size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(MaxPool2dOptions options);
  explicit MaxPool2d(Size2 kernel_size, Size2 stride = 0, Size2 padding = 0)
      : MaxPool2d(
            MaxPool2dOptions{.kernel_size = kernel_size, .stride = stride, .padding = padding}) {}
  Tensor forward(const Tensor& x) override;
  const MaxPool2dOptions& options() const { return options_; }

 private:
  MaxPool2dOptions options_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(AvgPool2dOptions options);
  explicit AvgPool2d(Size2 kernel_size, Size2 stride = 0, Size2 padding = 0)
      : AvgPool2d(
            AvgPool2dOptions{.kernel_size = kernel_size, .stride = stride, .padding = padding}) {}
  Tensor forward(const Tensor& x) override;
  const AvgPool2dOptions& options() const { return options_; }

 private:
  AvgPool2dOptions options_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  Tensor forward(const Tensor& x) override;
  Size2 output_size() const { return output_size_; }

 private:
  Size2 output_size_;
};

// Flattens dims start_dim..end_dim into one (by default everything but the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1)
      : Module("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& x) override;

 private:
  std::int64_t start_dim_, end_dim_;
};

// In training (is_training()) zeroes each element with probability p and scales the rest by
// 1 / (1 - p), with a fresh key from the default generator per call; in evaluation the identity.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  double p() const { return p_; }

 private:
  double p_;
};

class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};

}  // namespace remat::nn
