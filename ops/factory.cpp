#include "ops/factory.h"

#include <cmath>

#include "core/random.h"
#include "ops/cpu/loops.h"
#include "ops/op.h"
#if REMAT_WITH_CUDA
#include "ops/cuda/device_args.h"
#endif

namespace remat {
namespace {

Tensor finish(Tensor t, bool requires_grad) {
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

void check_shape(std::string_view op, const Shape& shape) {
  for (auto d : shape) REMAT_CHECK(d >= 0, "{}: negative dimension {} in shape {}", op, d, shape);
}

class FillOp final : public Op {
 public:
  FillOp(TensorMeta meta, double value) : meta_(std::move(meta)), value_(value) {}
  std::string_view name() const override { return "full"; }
  bool zero_derivative() const override { return true; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta>) const override { return {meta_}; }
  void cpu(std::span<const KernelArg>, std::span<const KernelArg> out) const override {
    detail::visit_dtype(meta_.dtype, [&]<class T>() {
      T* p = out[0].data<T>();
      const T v = static_cast<T>(value_);
      const auto n = out[0].meta->numel();
      for (std::int64_t i = 0; i < n; ++i) p[i] = v;
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg>, std::span<const KernelArg> out) const override {
    detail::cuda_launch::fill(detail::scalar_of(meta_.dtype), out[0].base, out[0].meta->numel(),
                              value_);
  }
#endif

 private:
  TensorMeta meta_;
  double value_;
};

class ArangeOp final : public Op {
 public:
  ArangeOp(TensorMeta meta, double start, double step)
      : meta_(std::move(meta)), start_(start), step_(step) {}
  std::string_view name() const override { return "arange"; }
  bool zero_derivative() const override { return true; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta>) const override { return {meta_}; }
  void cpu(std::span<const KernelArg>, std::span<const KernelArg> out) const override {
    detail::visit_dtype(meta_.dtype, [&]<class T>() {
      T* p = out[0].data<T>();
      const auto n = out[0].meta->numel();
      for (std::int64_t i = 0; i < n; ++i)
        p[i] = static_cast<T>(start_ + step_ * static_cast<double>(i));
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg>, std::span<const KernelArg> out) const override {
    detail::cuda_launch::arange(detail::scalar_of(meta_.dtype), out[0].base, out[0].meta->numel(),
                                start_, step_);
  }
#endif

 private:
  TensorMeta meta_;
  double start_, step_;
};

enum class Distribution { Uniform, Normal, Integer };

// Element i draws from philox(key, i / 4), lane i % 4 (normal: a Box-Muller pair per two lanes),
// so values depend only on the key and position, never on threads or chunking.
class RandomOp final : public Op {
 public:
  RandomOp(TensorMeta meta, Distribution dist, double a, double b, RngKey key)
      : meta_(std::move(meta)), dist_(dist), a_(a), b_(b), key_(key) {}
  std::string_view name() const override {
    return dist_ == Distribution::Uniform  ? "uniform"
           : dist_ == Distribution::Normal ? "normal"
                                           : "randint";
  }
  bool zero_derivative() const override { return true; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta>) const override { return {meta_}; }
  void cpu(std::span<const KernelArg>, std::span<const KernelArg> out) const override {
    detail::visit_dtype(meta_.dtype, [&]<class T>() {
      T* p = out[0].data<T>();
      const std::int64_t n = out[0].meta->numel();
      parallel_for(0, (n + 3) / 4, 4096, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t blk = b; blk < e; ++blk) {
          const auto bits = philox4x32(key_, static_cast<std::uint64_t>(blk));
          double v[4];
          draw(bits, v);
          for (int lane = 0; lane < 4; ++lane) {
            const std::int64_t i = blk * 4 + lane;
            if (i < n) p[i] = static_cast<T>(v[lane]);
          }
        }
      });
    });
  }

 private:
  void draw(const std::array<std::uint32_t, 4>& bits, double v[4]) const {
    switch (dist_) {
      case Distribution::Uniform:
        for (int l = 0; l < 4; ++l) v[l] = a_ + (b_ - a_) * uniform_from_bits(bits[l]);
        return;
      case Distribution::Integer:
        for (int l = 0; l < 4; ++l)
          v[l] = a_ + std::floor((b_ - a_) * (static_cast<double>(bits[l]) / 4294967296.0));
        return;
      case Distribution::Normal:
        for (int l = 0; l < 4; l += 2) {
          // (bits + 1) / 2^32 lies in (0, 1], so the log is finite.
          const double u1 = (static_cast<double>(bits[l]) + 1.0) / 4294967296.0;
          const double u2 = static_cast<double>(bits[l + 1]) / 4294967296.0;
          const double r = std::sqrt(-2.0 * std::log(u1));
          v[l] = a_ + b_ * r * std::cos(2.0 * M_PI * u2);
          v[l + 1] = a_ + b_ * r * std::sin(2.0 * M_PI * u2);
        }
        return;
    }
  }
  TensorMeta meta_;
  Distribution dist_;
  double a_, b_;
  RngKey key_;
};

Tensor random(std::string_view op, const Shape& shape, const RandomOptions& opts, Distribution d,
              double a, double b) {
  check_shape(op, shape);
  const RngKey key = opts.seed ? RngKey{*opts.seed, 0} : next_rng_key();
  auto t = call1(std::make_shared<RandomOp>(TensorMeta::contiguous(shape, opts.dtype, opts.device),
                                            d, a, b, key),
                 {});
  return finish(t, opts.requires_grad);
}

}  // namespace

Tensor full(const Shape& shape, double value, TensorOptions opts) {
  check_shape("full", shape);
  auto t = call1(
      std::make_shared<FillOp>(TensorMeta::contiguous(shape, opts.dtype, opts.device), value), {});
  return finish(t, opts.requires_grad);
}
Tensor zeros(const Shape& shape, TensorOptions opts) {
  return full(shape, 0.0, opts);
}
Tensor ones(const Shape& shape, TensorOptions opts) {
  return full(shape, 1.0, opts);
}
Tensor zeros_like(const Tensor& t) {
  return full(t.shape(), 0.0, {t.dtype(), t.device()});
}
Tensor ones_like(const Tensor& t) {
  return full(t.shape(), 1.0, {t.dtype(), t.device()});
}
Tensor full_like(const Tensor& t, double value) {
  return full(t.shape(), value, {t.dtype(), t.device()});
}
Tensor scalar_tensor(double value, TensorOptions opts) {
  return full({}, value, opts);
}

Tensor arange(double start, double end, double step, TensorOptions opts) {
  REMAT_CHECK(step != 0, "arange: step must be non-zero");
  REMAT_CHECK((end - start) / step >= 0,
              "arange: range [{}, {}) with step {} is empty in the wrong direction", start, end,
              step);
  const auto n = static_cast<std::int64_t>(std::ceil((end - start) / step));
  auto t = call1(
      std::make_shared<ArangeOp>(TensorMeta::contiguous({n}, opts.dtype, opts.device), start, step),
      {});
  return finish(t, opts.requires_grad);
}

Tensor rand(const Shape& shape, RandomOptions opts) {
  return random("rand", shape, opts, Distribution::Uniform, 0.0, 1.0);
}
Tensor uniform(const Shape& shape, double low, double high, RandomOptions opts) {
  REMAT_CHECK(low <= high, "uniform: low {} is above high {}", low, high);
  return random("uniform", shape, opts, Distribution::Uniform, low, high);
}
Tensor randn(const Shape& shape, RandomOptions opts) {
  return random("randn", shape, opts, Distribution::Normal, 0.0, 1.0);
}
Tensor normal(const Shape& shape, double mean, double std, RandomOptions opts) {
  REMAT_CHECK(std >= 0, "normal: std must be non-negative, got {}", std);
  return random("normal", shape, opts, Distribution::Normal, mean, std);
}
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, RandomOptions opts) {
  REMAT_CHECK(low < high, "randint: empty range [{}, {})", low, high);
  if (opts.dtype == DType::Float32) opts.dtype = DType::Int64;
  return random("randint", shape, opts, Distribution::Integer, static_cast<double>(low),
                static_cast<double>(high));
}

template <class T>
Tensor tensor(const std::vector<T>& values, std::optional<Shape> given, bool requires_grad) {
  const Shape shape = given ? *given : Shape{static_cast<std::int64_t>(values.size())};
  check_shape("tensor", shape);
  REMAT_CHECK(shape_numel(shape) == static_cast<std::int64_t>(values.size()),
              "tensor: {} values do not fill shape {}", values.size(), shape);
  auto t = constant_from_bytes(values.data(),
                               TensorMeta::contiguous(shape, dtype_of<T>(), Device::cpu()));
  return finish(t, requires_grad);
}
template Tensor tensor<float>(const std::vector<float>&, std::optional<Shape>, bool);
template Tensor tensor<double>(const std::vector<double>&, std::optional<Shape>, bool);
template Tensor tensor<std::int64_t>(const std::vector<std::int64_t>&, std::optional<Shape>, bool);

}  // namespace remat
