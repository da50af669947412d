#include "nn/transforms.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "core/random.h"
#include "nn/data.h"
#include "ops/cpu/loops.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/op.h"
#include "ops/view.h"

namespace remat::nn {
namespace {

// Salts keep a crop and a flip built with the same seed from drawing the same bits.
constexpr std::uint64_t kCropSalt = 0x43524f50ull;  // "CROP"
constexpr std::uint64_t kFlipSalt = 0x464c4950ull;  // "FLIP"

// A uniform integer in [0, range) from 32 random bits (multiply-shift; bias below range / 2^32).
std::int64_t below(std::uint32_t bits, std::int64_t range) {
  return static_cast<std::int64_t>(
      (static_cast<std::uint64_t>(bits) * static_cast<std::uint64_t>(range)) >> 32);
}

std::array<std::int64_t, 2> crop_offset(RngKey key, std::int64_t sample, std::int64_t rows,
                                        std::int64_t cols) {
  const auto bits = philox4x32(key, static_cast<std::uint64_t>(sample));
  return {below(bits[0], rows), below(bits[1], cols)};
}

bool flip_draw(RngKey key, std::int64_t sample, double p) {
  const auto bits = philox4x32(key, static_cast<std::uint64_t>(sample));
  return static_cast<double>(uniform_from_bits(bits[0])) < p;
}

void check_data_only(const char* name, const Tensor& batch) {
  REMAT_CHECK(batch.defined(), "{}: the batch is an undefined tensor", name);
  REMAT_CHECK(!(GradMode::is_enabled() && batch.requires_grad()),
              "{}: the batch (shape {}) requires grad; data transforms run outside autograd "
              "(detach it, or call under NoGradGuard)",
              name, batch.shape());
  REMAT_CHECK(batch.device().is_cpu(), "{}: batch on {} is not supported", name, batch.device());
}

// Elements of one example's plane stack: the product of the dims between B and the last
// `tail` dims.
std::int64_t planes_per_sample(const TensorMeta& m, int tail) {
  std::int64_t planes = 1;
  for (std::int64_t d = 1; d < m.dim() - tail; ++d) planes *= m.shape[d];
  return planes;
}

// Zero-pads H and W by pad_ and cuts a size_ x size_ window per example at crop_offset(key_, b).
// Data transform: not differentiable.
class RandomCropOp final : public Op {
 public:
  RandomCropOp(std::int64_t size, std::int64_t pad, RngKey key)
      : size_(size), pad_(pad), key_(key) {}
  std::string_view name() const override { return "random_crop"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& m = in[0];
    REMAT_CHECK(m.dim() >= 3 && m.is_contiguous(),
                "random_crop: expected a contiguous batch [B, ..., H, W], got shape {}", m.shape);
    Shape s = m.shape;
    s[s.size() - 2] = size_;
    s[s.size() - 1] = size_;
    return {TensorMeta::contiguous(std::move(s), m.dtype, m.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    const std::int64_t h = m.shape[m.dim() - 2], w = m.shape[m.dim() - 1];
    const std::int64_t planes = planes_per_sample(m, 2);
    const std::int64_t total = m.shape[0] * planes, n = size_;
    const std::int64_t rows = h + 2 * pad_ - n + 1, cols = w + 2 * pad_ - n + 1;
    remat::detail::visit_dtype(m.dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      parallel_for(0, total, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(n * n, 1)),
                   [&](std::int64_t b, std::int64_t e) {
                     for (std::int64_t p = b; p < e; ++p) {
                       const auto off = crop_offset(key_, p / planes, rows, cols);
                       const T* src = x + p * h * w;
                       T* dst = y + p * n * n;
                       // Output column c reads input column c + x0; valid for c in [lo, hi).
                       const std::int64_t x0 = off[1] - pad_;
                       const std::int64_t lo = std::clamp<std::int64_t>(-x0, 0, n);
                       const std::int64_t hi = std::clamp<std::int64_t>(w - x0, lo, n);
                       for (std::int64_t r = 0; r < n; ++r) {
                         T* drow = dst + r * n;
                         const std::int64_t sy = r + off[0] - pad_;
                         if (sy < 0 || sy >= h) {
                           std::fill_n(drow, n, T(0));
                           continue;
                         }
                         std::fill_n(drow, lo, T(0));
                         if (hi > lo) std::copy_n(src + sy * w + lo + x0, hi - lo, drow + lo);
                         std::fill_n(drow + hi, n - hi, T(0));
                       }
                     }
                   });
    });
  }

 private:
  std::int64_t size_, pad_;
  RngKey key_;
};

class RandomFlipOp final : public Op {
 public:
  RandomFlipOp(double p, RngKey key) : p_(p), key_(key) {}
  std::string_view name() const override { return "random_horizontal_flip"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& m = in[0];
    REMAT_CHECK(m.dim() >= 2 && m.is_contiguous(),
                "random_horizontal_flip: expected a contiguous batch [B, ..., W], got shape {}",
                m.shape);
    return {TensorMeta::contiguous(m.shape, m.dtype, m.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    const std::int64_t w = m.shape[m.dim() - 1];
    const std::int64_t per_sample = m.shape[0] == 0 ? 0 : m.numel() / m.shape[0];
    const std::int64_t rows_per_sample = w == 0 ? 0 : per_sample / w;
    remat::detail::visit_dtype(m.dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      parallel_for(0, m.shape[0], 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t s = b; s < e; ++s) {
          const T* src = x + s * per_sample;
          T* dst = y + s * per_sample;
          if (!flip_draw(key_, s, p_)) {
            std::copy_n(src, per_sample, dst);
            continue;
          }
          for (std::int64_t r = 0; r < rows_per_sample; ++r)
            std::reverse_copy(src + r * w, src + (r + 1) * w, dst + r * w);
        }
      });
    });
  }

 private:
  double p_;
  RngKey key_;
};

}  // namespace

Normalize::Normalize(std::vector<double> mean, std::vector<double> std)
    : mean_(std::move(mean)), std_(std::move(std)) {
  REMAT_CHECK(!mean_.empty() && mean_.size() == std_.size(),
              "Normalize: need one mean and one std per channel, got {} means and {} stds",
              mean_.size(), std_.size());
  for (std::size_t c = 0; c < std_.size(); ++c)
    REMAT_CHECK(std::isfinite(mean_[c]) && std::isfinite(std_[c]) && std_[c] != 0,
                "Normalize: channel {} has mean {} and std {}; both must be finite and std "
                "non-zero",
                c, mean_[c], std_[c]);
}

Tensor Normalize::apply(const Tensor& batch, std::uint64_t) const {
  REMAT_CHECK(batch.defined(), "Normalize: the batch is an undefined tensor");
  REMAT_CHECK(is_floating(batch.dtype()),
              "Normalize: expected a floating-point batch, got {} of shape {}", batch.dtype(),
              batch.shape());
  REMAT_CHECK(batch.dim() >= 2 && batch.size(1) == static_cast<std::int64_t>(mean_.size()),
              "Normalize: batch of shape {} does not have {} channels in dim 1", batch.shape(),
              mean_.size());
  Shape shape(static_cast<std::size_t>(batch.dim()), 1);
  shape[1] = static_cast<std::int64_t>(mean_.size());
  auto as_tensor = [&](const std::vector<double>& v) {
    if (batch.dtype() == DType::Float64) return tensor<double>(v, shape);
    return tensor<float>(std::vector<float>(v.begin(), v.end()), shape);
  };
  return div(sub(batch, as_tensor(mean_)), as_tensor(std_));
}

RandomCrop::RandomCrop(std::int64_t size, std::int64_t padding, std::uint64_t seed)
    : size_(size), padding_(padding), seed_(seed) {
  REMAT_CHECK(size >= 1, "RandomCrop: size must be at least 1, got {}", size);
  REMAT_CHECK(padding >= 0, "RandomCrop: padding must be non-negative, got {}", padding);
}

std::array<std::int64_t, 2> RandomCrop::offset(std::uint64_t call, std::int64_t sample,
                                               std::int64_t h, std::int64_t w) const {
  REMAT_CHECK(h + 2 * padding_ >= size_ && w + 2 * padding_ >= size_,
              "RandomCrop: a {}x{} crop does not fit in {}x{} with padding {}", size_, size_, h, w,
              padding_);
  return crop_offset({detail::mix_seed(seed_, kCropSalt), call}, sample,
                     h + 2 * padding_ - size_ + 1, w + 2 * padding_ - size_ + 1);
}

Tensor RandomCrop::apply(const Tensor& batch, std::uint64_t call) const {
  check_data_only("RandomCrop", batch);
  REMAT_CHECK(batch.dim() >= 3, "RandomCrop: expected a batch [B, ..., H, W], got shape {}",
              batch.shape());
  const std::int64_t h = batch.size(-2), w = batch.size(-1);
  REMAT_CHECK(h + 2 * padding_ >= size_ && w + 2 * padding_ >= size_,
              "RandomCrop: a {}x{} crop does not fit in a batch of shape {} with padding {}", size_,
              size_, batch.shape(), padding_);
  const RngKey key{detail::mix_seed(seed_, kCropSalt), call};
  return call1(std::make_shared<RandomCropOp>(size_, padding_, key), {contiguous(batch)});
}

RandomHorizontalFlip::RandomHorizontalFlip(double p, std::uint64_t seed) : p_(p), seed_(seed) {
  REMAT_CHECK(p >= 0 && p <= 1, "RandomHorizontalFlip: probability must be in [0, 1], got {}", p);
}

bool RandomHorizontalFlip::flips(std::uint64_t call, std::int64_t sample) const {
  return flip_draw({detail::mix_seed(seed_, kFlipSalt), call}, sample, p_);
}

Tensor RandomHorizontalFlip::apply(const Tensor& batch, std::uint64_t call) const {
  check_data_only("RandomHorizontalFlip", batch);
  REMAT_CHECK(batch.dim() >= 2, "RandomHorizontalFlip: expected a batch [B, ..., W], got shape {}",
              batch.shape());
  if (p_ == 0) return batch;
  const RngKey key{detail::mix_seed(seed_, kFlipSalt), call};
  return call1(std::make_shared<RandomFlipOp>(p_, key), {contiguous(batch)});
}

Compose::Compose(std::vector<std::shared_ptr<const Transform>> transforms)
    : transforms_(std::move(transforms)) {
  for (std::size_t i = 0; i < transforms_.size(); ++i)
    REMAT_CHECK(transforms_[i] != nullptr, "Compose: transform {} is null", i);
}

Tensor Compose::apply(const Tensor& batch, std::uint64_t call) const {
  Tensor x = batch;
  for (const auto& t : transforms_) x = t->apply(x, call);
  return x;
}

}  // namespace remat::nn
