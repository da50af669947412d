#include "ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "autograd/grad_mode.h"
#include "ops/cpu/lane_sum.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/softmax_row.h"
#include "ops/cuda/device_args.h"
#include "ops/elementwise.h"
#include "ops/op.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace remat {
namespace {

using detail::exp_diff;
using detail::lane_sum;
using detail::row_max;

// A row of `n` contiguous elements: the softmax dim is the innermost.
template <class T>
void softmax_row(const T* x, T* y, std::int64_t n, bool log) {
  const T m = row_max(x, n);
  exp_diff(x, &m, 0, y, n);
  const double s = lane_sum(y, n);
  if (log) {
    const T lse = static_cast<T>(std::log(s));
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - lse;
  } else {
    const T inv = static_cast<T>(1.0 / s);
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// A block [d, j] of a [D, inner] slab, columns j0..j0+w: the softmax dim has stride `inner`,
// so the loops run along j (contiguous) and keep per-column running max and sum.
template <class T>
void softmax_columns(const T* x, T* y, std::int64_t d_size, std::int64_t inner, std::int64_t w,
                     bool log) {
  constexpr std::int64_t kMaxWidth = 256;
  T mx[kMaxWidth];
  double sum[kMaxWidth];
  for (std::int64_t j = 0; j < w; ++j) mx[j] = x[j], sum[j] = 0;
  for (std::int64_t d = 1; d < d_size; ++d) {
    const T* row = x + d * inner;
#pragma omp simd
    for (std::int64_t j = 0; j < w; ++j) mx[j] = row[j] > mx[j] ? row[j] : mx[j];
  }
  for (std::int64_t d = 0; d < d_size; ++d) {
    const T* row = x + d * inner;
    T* out = y + d * inner;
    exp_diff(row, mx, 1, out, w);
#pragma omp simd
    for (std::int64_t j = 0; j < w; ++j) sum[j] += static_cast<double>(out[j]);
  }
  if (log) {
    T lse[kMaxWidth];
    for (std::int64_t j = 0; j < w; ++j) lse[j] = static_cast<T>(std::log(sum[j]));
    for (std::int64_t d = 0; d < d_size; ++d) {
      const T* row = x + d * inner;
      T* out = y + d * inner;
#pragma omp simd
      for (std::int64_t j = 0; j < w; ++j) out[j] = (row[j] - mx[j]) - lse[j];
    }
  } else {
    T inv[kMaxWidth];
    for (std::int64_t j = 0; j < w; ++j) inv[j] = static_cast<T>(1.0 / sum[j]);
    for (std::int64_t d = 0; d < d_size; ++d) {
      T* out = y + d * inner;
#pragma omp simd
      for (std::int64_t j = 0; j < w; ++j) out[j] *= inv[j];
    }
  }
}

// The first derivative of (log_)softmax along the innermost dim in one pass per row: log:
// dx = g - exp(y) * sum(g); softmax: dx = y * (g - sum(g * y)), the sums in double in eight
// lanes.  Inputs {g, y}, both contiguous.  Used only when no graph of the gradient is being
// built (the public-op formula serves create_graph and other dims).
class SoftmaxBackwardOp final : public Op {
 public:
  explicit SoftmaxBackwardOp(bool log) : log_(log) {}
  std::string_view name() const override {
    return log_ ? "log_softmax_backward" : "softmax_backward";
  }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 2 && in[0].shape == in[1].shape && in[0].dtype == in[1].dtype &&
                    in[0].is_contiguous() && in[1].is_contiguous() && in[0].dim() >= 1,
                "{}: internal error, gradient {} and output {} must be contiguous and alike",
                name(), in[0].shape, in.size() > 1 ? in[1].shape : Shape{});
    return {TensorMeta::contiguous(in[0].shape, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    const std::int64_t n = m.shape[m.dim() - 1];
    if (m.numel() == 0) return;
    const std::int64_t rows = m.numel() / n;
    detail::visit_floating(m.dtype, [&]<class T>() {
      const T* g = in[0].data<T>();
      const T* y = in[1].data<T>();
      T* dx = out[0].data<T>();
      const bool log = log_;
      parallel_for(0, rows, grain_for(n), [=](std::int64_t b, std::int64_t e) {
        for (std::int64_t r = b; r < e; ++r) {
          const T *gr = g + r * n, *yr = y + r * n;
          T* o = dx + r * n;
          if (log) {
            const T s = static_cast<T>(lane_sum(gr, n));
            for (std::int64_t i = 0; i < n; ++i) o[i] = gr[i] - detail::vexp(yr[i]) * s;
          } else {
            const T s = static_cast<T>(detail::lane_dot(gr, yr, n));
            for (std::int64_t i = 0; i < n; ++i) o[i] = yr[i] * (gr[i] - s);
          }
        }
      });
    });
  }

#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    const std::int64_t n = m.shape[m.dim() - 1];
    detail::cuda_launch::softmax_backward(detail::scalar_of(m.dtype), n == 0 ? 0 : m.numel() / n, n,
                                          in[0].bytes(), in[1].bytes(), out[0].bytes(), log_);
  }
#endif
 private:
  bool log_;
};

class SoftmaxOp final : public Op {
 public:
  SoftmaxOp(std::int64_t dim, bool log) : dim_(dim), log_(log) {}
  std::string_view name() const override { return log_ ? "log_softmax" : "softmax"; }
  SaveSpec saves() const override { return {0, 1}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(is_floating(in[0].dtype),
                "{}: expected a floating-point tensor, got {} of shape {}", name(), in[0].dtype,
                in[0].shape);
    // The public functions pass contiguous inputs; the kernel relies on it.
    REMAT_CHECK(in[0].is_contiguous(), "{}: internal error, input of shape {} is not contiguous",
                name(), in[0].shape);
    return {TensorMeta::contiguous(in[0].shape, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    if (m.numel() == 0) return;
    std::int64_t outer = 1, inner = 1;
    const std::int64_t d_size = m.dim() == 0 ? 1 : m.shape[dim_];
    for (std::int64_t d = 0; d < dim_; ++d) outer *= m.shape[d];
    for (std::int64_t d = dim_ + 1; d < m.dim(); ++d) inner *= m.shape[d];
    detail::visit_floating(m.dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      if (inner == 1) {
        parallel_for(0, outer, grain_for(d_size), [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t r = b; r < e; ++r)
            softmax_row(x + r * d_size, y + r * d_size, d_size, log_);
        });
        return;
      }
      constexpr std::int64_t kWidth = 256;
      const std::int64_t blocks = (inner + kWidth - 1) / kWidth;
      const std::int64_t work = d_size * std::min(inner, kWidth);
      parallel_for(0, outer * blocks, grain_for(work), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t t = b; t < e; ++t) {
          const std::int64_t o = t / blocks, j0 = (t % blocks) * kWidth;
          const std::int64_t off = o * d_size * inner + j0;
          softmax_columns(x + off, y + off, d_size, inner, std::min(kWidth, inner - j0), log_);
        }
      });
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    std::int64_t outer = 1, inner = 1;
    const std::int64_t d_size = m.dim() == 0 ? 1 : m.shape[dim_];
    for (std::int64_t d = 0; d < dim_; ++d) outer *= m.shape[d];
    for (std::int64_t d = dim_ + 1; d < m.dim(); ++d) inner *= m.shape[d];
    detail::cuda_launch::softmax(detail::scalar_of(m.dtype), outer, d_size, inner, in[0].bytes(),
                                 out[0].bytes(), log_);
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    const Tensor& y = c.output(0);
    const std::vector<std::int64_t> dims =
        y.dim() == 0 ? std::vector<std::int64_t>{} : std::vector{dim_};
    if (!GradMode::is_enabled() && y.dim() >= 1 && dim_ == y.dim() - 1)
      return {call1(std::make_shared<SoftmaxBackwardOp>(log_), {contiguous(g), y})};
    if (log_) return {sub(g, mul(exp(y), sum(g, dims, true)))};
    return {mul(y, sub(g, sum(mul(g, y), dims, true)))};
  }

 private:
  std::int64_t dim_;
  bool log_;
};

Tensor softmax_impl(const Tensor& x, std::int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  REMAT_CHECK(x.defined(), "{}: the input is an undefined tensor", op);
  REMAT_CHECK(is_floating(x.dtype()), "{}: expected a floating-point tensor, got {} of shape {}",
              op, x.dtype(), x.shape());
  // A 0-dim tensor behaves as one element along dim 0 or -1, as in PyTorch.
  const std::int64_t d = wrap_dim(op, dim, std::max<std::int64_t>(x.dim(), 1));
  return call1(std::make_shared<SoftmaxOp>(x.dim() == 0 ? 0 : d, log), {contiguous(x)});
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) {
  return softmax_impl(x, dim, false);
}
Tensor log_softmax(const Tensor& x, std::int64_t dim) {
  return softmax_impl(x, dim, true);
}

}  // namespace remat
