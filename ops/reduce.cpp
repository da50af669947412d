#include "ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/loops.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/index.h"
#include "ops/op.h"
#if REMAT_WITH_CUDA
#include "ops/cuda/device_args.h"
#endif
#include "ops/view.h"

namespace remat {
namespace {

// Sorted, unique, wrapped dims; empty input means all dims.
std::vector<std::int64_t> reduced_dims(std::string_view op, const std::vector<std::int64_t>& dims,
                                       std::int64_t ndim) {
  std::vector<std::int64_t> out;
  if (dims.empty()) {
    for (std::int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (auto d : dims) out.push_back(wrap_dim(op, d, ndim));
  std::sort(out.begin(), out.end());
  REMAT_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), "{}: dim repeated in {}", op,
              dims);
  return out;
}

Shape reduced_shape(const Shape& in, const std::vector<std::int64_t>& dims, bool keepdim) {
  Shape out;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(in.size()); ++d) {
    const bool r = std::binary_search(dims.begin(), dims.end(), d);
    if (!r)
      out.push_back(in[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// Iteration geometry shared by the reduction kernels: kept dims index outputs (output element
// order), reduced dims are walked in row-major order for each output.
struct ReduceGeometry {
  Shape kept_shape, kept_in_strides, red_shape, red_strides;
  std::int64_t outputs = 1, reduced = 1;
  ReduceGeometry(const TensorMeta& in, const std::vector<std::int64_t>& dims) {
    for (std::int64_t d = 0; d < in.dim(); ++d) {
      if (std::binary_search(dims.begin(), dims.end(), d)) {
        red_shape.push_back(in.shape[d]);
        red_strides.push_back(in.strides[d]);
        reduced *= in.shape[d];
      } else {
        kept_shape.push_back(in.shape[d]);
        kept_in_strides.push_back(in.strides[d]);
        outputs *= in.shape[d];
      }
    }
  }
  std::int64_t input_offset(std::int64_t out_index) const {
    std::int64_t off = 0;
    for (std::size_t d = kept_shape.size(); d-- > 0;) {
      off += (out_index % kept_shape[d]) * kept_in_strides[d];
      out_index /= kept_shape[d];
    }
    return off;
  }
  // Calls f(offset) for every reduced element in row-major order.
  template <class F>
  void walk(std::int64_t base, F&& f) const {
    const std::size_t n = red_shape.size();
    if (n == 0) return f(base);
    if (reduced == 0) return;
    std::vector<std::int64_t> idx(n, 0);
    const std::int64_t inner = red_shape[n - 1], inner_stride = red_strides[n - 1];
    std::int64_t off = base;
    while (true) {
      for (std::int64_t i = 0; i < inner; ++i) f(off + i * inner_stride);
      std::size_t d = n - 1;
      while (d-- > 0) {
        off += red_strides[d];
        if (++idx[d] < red_shape[d]) break;
        off -= red_strides[d] * red_shape[d];
        idx[d] = 0;
      }
      if (d == static_cast<std::size_t>(-1)) return;
    }
  }
};

// Accumulator type: double for floating inputs (accurate and order-independent enough to match
// PyTorch closely), int64 for integers.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;

class SumOp final : public Op {
 public:
  SumOp(std::vector<std::int64_t> dims, bool keepdim) : dims_(std::move(dims)), keepdim_(keepdim) {}
  std::string_view name() const override { return "sum"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    return {TensorMeta::contiguous(reduced_shape(in[0].shape, dims_, keepdim_), in[0].dtype,
                                   in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::visit_dtype(in[0].meta->dtype, [&]<class T>() {
      const ReduceGeometry g(*in[0].meta, dims_);
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      const bool contiguous_inner = !g.red_shape.empty() && g.red_strides.back() == 1;
      if (leading_reduction(*in[0].meta)) {
        // Reducing the leading dims of a contiguous tensor (bias gradients): rows added into a
        // block of accumulators walk memory in order, where one strided column per output
        // would miss the cache on every element.  Each column still sums its rows in order,
        // so the bits are those of the general path.
        const std::int64_t rows = g.reduced, cols = g.outputs;
        parallel_for(0, cols, std::max<std::int64_t>(64, grain_for(rows)),
                     [&](std::int64_t b, std::int64_t e) {
                       constexpr std::int64_t kBlock = 256;
                       Acc<T> acc[kBlock];
                       for (std::int64_t c0 = b; c0 < e; c0 += kBlock) {
                         const std::int64_t w = std::min(kBlock, e - c0);
                         std::fill(acc, acc + w, Acc<T>(0));
                         for (std::int64_t r = 0; r < rows; ++r) {
                           const T* row = x + r * cols + c0;
                           for (std::int64_t j = 0; j < w; ++j) acc[j] += row[j];
                         }
                         for (std::int64_t j = 0; j < w; ++j) y[c0 + j] = static_cast<T>(acc[j]);
                       }
                     });
        return;
      }
      parallel_for(0, g.outputs, grain_for(g.reduced), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t o = b; o < e; ++o) {
          const std::int64_t base = g.input_offset(o);
          if (contiguous_inner && g.red_shape.size() == 1) {
            // Four independent accumulators let the compiler keep the loop pipelined.
            Acc<T> a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            const T* p = x + base;
            const std::int64_t n = g.reduced;
            std::int64_t i = 0;
            for (; i + 4 <= n; i += 4) a0 += p[i], a1 += p[i + 1], a2 += p[i + 2], a3 += p[i + 3];
            for (; i < n; ++i) a0 += p[i];
            y[o] = static_cast<T>((a0 + a1) + (a2 + a3));
          } else {
            Acc<T> acc = 0;
            g.walk(base, [&](std::int64_t off) { acc += x[off]; });
            y[o] = static_cast<T>(acc);
          }
        }
      });
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const ReduceGeometry g(*in[0].meta, dims_);
    auto operand = [&](const Shape& strides) {
      detail::cuda_launch::Operand o;
      o.data = in[0].bytes();
      for (std::size_t d = 0; d < strides.size(); ++d) o.strides[d] = strides[d];
      return o;
    };
    detail::cuda_launch::sum(detail::scalar_of(in[0].meta->dtype), detail::extent_of(g.kept_shape),
                             operand(g.kept_in_strides), detail::extent_of(g.red_shape),
                             operand(g.red_strides), out[0].bytes());
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Shape& in_shape = c.input_meta(0).shape;
    return {expand(reshape(c.grad(0), reduced_shape(in_shape, dims_, true)), in_shape)};
  }

 private:
  // A contiguous input reduced over dims 0..r-1 only, with some dims kept after them.
  bool leading_reduction(const TensorMeta& in) const {
    if (!in.is_contiguous() || dims_.empty() || static_cast<std::int64_t>(dims_.size()) >= in.dim())
      return false;
    for (std::size_t i = 0; i < dims_.size(); ++i)
      if (dims_[i] != static_cast<std::int64_t>(i)) return false;
    return true;
  }

  std::vector<std::int64_t> dims_;
  bool keepdim_;
};

// Max/min along one dim: values and first index of the extreme (NaN counts as the extreme).
class ExtremeOp final : public Op {
 public:
  ExtremeOp(bool is_max, std::int64_t dim, bool keepdim)
      : is_max_(is_max), dim_(dim), keepdim_(keepdim) {}
  std::string_view name() const override { return is_max_ ? "max" : "min"; }
  SaveSpec saves() const override { return {0, 0b10}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in[0].dim() == 0 || in[0].shape[dim_] > 0,
                "{}: cannot reduce an empty dim {} of shape {}", name(), dim_, in[0].shape);
    Shape s = in[0].dim() == 0 ? Shape{} : reduced_shape(in[0].shape, {dim_}, keepdim_);
    return {TensorMeta::contiguous(s, in[0].dtype, in[0].device),
            TensorMeta::contiguous(s, DType::Int64, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::visit_dtype(in[0].meta->dtype, [&]<class T>() {
      const ReduceGeometry g(
          *in[0].meta, in[0].meta->dim() == 0 ? std::vector<std::int64_t>{} : std::vector{dim_});
      const T* x = in[0].data<T>();
      T* v = out[0].data<T>();
      std::int64_t* ix = out[1].data<std::int64_t>();
      const std::int64_t stride = g.red_strides.empty() ? 0 : g.red_strides[0];
      parallel_for(0, g.outputs, 1024, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t o = b; o < e; ++o) {
          const T* p = x + g.input_offset(o);
          T best = p[0];
          std::int64_t best_i = 0;
          for (std::int64_t i = 1; i < g.reduced; ++i) {
            const T val = p[i * stride];
            if (std::isnan(static_cast<double>(best))) break;
            if (std::isnan(static_cast<double>(val)) || (is_max_ ? val > best : val < best))
              best = val, best_i = i;
          }
          v[o] = best;
          ix[o] = best_i;
        }
      });
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    const ReduceGeometry g(m, m.dim() == 0 ? std::vector<std::int64_t>{} : std::vector{dim_});
    detail::cuda_launch::Operand kept;
    kept.data = in[0].bytes();
    for (std::size_t d = 0; d < g.kept_in_strides.size(); ++d)
      kept.strides[d] = g.kept_in_strides[d];
    detail::cuda_launch::extreme(is_max_, detail::scalar_of(m.dtype),
                                 detail::extent_of(g.kept_shape), kept, g.reduced,
                                 g.red_strides.empty() ? 0 : g.red_strides[0], out[0].bytes(),
                                 reinterpret_cast<std::int64_t*>(out[1].bytes()));
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Shape& in_shape = c.input_meta(0).shape;
    if (in_shape.empty()) return {c.grad(0)};
    const Shape keep = reduced_shape(in_shape, {dim_}, true);
    Tensor g = reshape(c.grad(0), keep), idx = reshape(c.output(1), keep);
    return {scatter_add(zeros(in_shape, {g.dtype(), g.device()}), dim_, idx, g)};
  }

 private:
  bool is_max_;
  std::int64_t dim_;
  bool keepdim_;
};

std::pair<Tensor, Tensor> extreme(bool is_max, const Tensor& t, std::int64_t dim, bool keepdim) {
  const auto d = t.dim() == 0 ? 0 : wrap_dim(is_max ? "max" : "min", dim, t.dim());
  auto outs = call(std::make_shared<ExtremeOp>(is_max, d, keepdim), {t});
  return {outs[0], outs[1]};
}

Tensor extreme_all(bool is_max, const Tensor& t) {
  REMAT_CHECK(t.numel() > 0, "{}: cannot reduce an empty tensor of shape {}",
              is_max ? "max" : "min", t.shape());
  Tensor flat = reshape(t, {-1});
  Tensor value = extreme(is_max, flat, 0, false).first;
  if (!t.requires_grad()) return value;
  // Ties share the gradient equally: (x == m) / count, written with differentiable ops.
  Tensor m = detach(value);
  Tensor mask = eq(t, m);
  Tensor weight = div(mask, sum(mask));
  return sum(mul(t, weight));
}

// Running sum along one dim of a contiguous input, seen as [outer, n, inner].
class CumsumOp final : public Op {
 public:
  explicit CumsumOp(std::int64_t dim) : dim_(dim) {}
  std::string_view name() const override { return "cumsum"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in[0].is_contiguous(), "cumsum: internal error, the input must be contiguous");
    return {TensorMeta::contiguous(in[0].shape, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    // Plain names, not structured bindings: clang 14 cannot capture those in lambdas.
    const detail::DimSplit split(in[0].meta->shape, dim_);
    const std::int64_t outer = split.outer, n = split.n, inner = split.inner;
    detail::visit_dtype(in[0].meta->dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < inner; ++i) {
          Acc<T> acc = 0;
          for (std::int64_t j = 0; j < n; ++j) {
            const std::int64_t at = (o * n + j) * inner + i;
            acc += x[at];
            y[at] = static_cast<T>(acc);
          }
        }
    });
  }
  // The gradient is the reversed running sum of g: sum(g) - cumsum(g) + g.
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    if (g.dim() == 0) return {g};
    return {add(sub(sum(g, {dim_}, true), cumsum(g, dim_)), g)};
  }

 private:
  std::int64_t dim_;
};

// Vector p-norm over dims, as torch.linalg.vector_norm: p = 0 counts nonzeros, +-inf is the
// largest / smallest magnitude, otherwise (sum |x|^p)^(1/p).  Accumulated in double.
class NormOp final : public Op {
 public:
  NormOp(double p, std::vector<std::int64_t> dims, bool keepdim)
      : p_(p), dims_(std::move(dims)), keepdim_(keepdim) {}
  std::string_view name() const override { return "norm"; }
  SaveSpec saves() const override { return {0b1, 0b1}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    return {TensorMeta::contiguous(reduced_shape(in[0].shape, dims_, keepdim_), in[0].dtype,
                                   in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const ReduceGeometry g(*in[0].meta, dims_);
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      parallel_for(0, g.outputs, grain_for(g.reduced), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t o = b; o < e; ++o)
          y[o] = static_cast<T>(reduce_one(g, x, g.input_offset(o)));
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& x = c.input(0);
    const Shape keep = reduced_shape(x.shape(), dims_, true);
    const Tensor g = reshape(c.grad(0), keep), n = reshape(c.output(0), keep);
    if (p_ == 0) return {zeros_like(x)};
    if (p_ == 1) return {mul(g, sign(x))};
    if (std::isinf(p_)) {
      // Ties at the extreme share the gradient equally, as PyTorch's amax.
      const Tensor at = eq(abs(x), n);
      return {mul(mul(g, sign(x)), div(at, sum(at, dims_, true)))};
    }
    // g * sign(x) |x|^(p-1) / n^(p-1), written so that a zero norm or element gives 0 (not NaN)
    // in this derivative and in the next: the divisor is 1 where n is 0 (x is all zero there).
    const Tensor zero_norm = eq(n, 0.0);
    const Tensor n_safe = where(zero_norm, ones_like(n), n);
    if (p_ == 2) return {where(zero_norm, zeros_like(x), mul(g, div(x, n_safe)))};
    const Tensor a = abs(x), zero = eq(a, 0.0);
    const Tensor scaled =
        where(zero, zeros_like(x), mul(sign(x), pow(where(zero, ones_like(a), a), p_ - 1)));
    return {mul(g, div(scaled, pow(n_safe, p_ - 1)))};
  }

 private:
  template <class T>
  double reduce_one(const ReduceGeometry& g, const T* x, std::int64_t base) const {
    if (std::isinf(p_)) {
      double best = p_ > 0 ? 0.0 : std::numeric_limits<double>::infinity();
      g.walk(base, [&](std::int64_t off) {
        const double a = std::abs(static_cast<double>(x[off]));
        if (std::isnan(a) || std::isnan(best))
          best = std::numeric_limits<double>::quiet_NaN();
        else
          best = p_ > 0 ? std::max(best, a) : std::min(best, a);
      });
      return best;
    }
    double acc = 0;
    g.walk(base, [&](std::int64_t off) {
      const double a = std::abs(static_cast<double>(x[off]));
      acc += p_ == 0 ? (a != 0) : p_ == 1 ? a : p_ == 2 ? a * a : std::pow(a, p_);
    });
    return p_ == 0 || p_ == 1 ? acc : p_ == 2 ? std::sqrt(acc) : std::pow(acc, 1.0 / p_);
  }

  double p_;
  std::vector<std::int64_t> dims_;
  bool keepdim_;
};

}  // namespace

Tensor cumsum(const Tensor& t, std::int64_t dim) {
  REMAT_CHECK(t.defined(), "cumsum: undefined tensor");
  const std::int64_t d = wrap_dim("cumsum", dim, t.dim());
  return call1(std::make_shared<CumsumOp>(t.dim() == 0 ? 0 : d), {contiguous(t)});
}

Tensor norm(const Tensor& t, double p, std::vector<std::int64_t> dims, bool keepdim) {
  REMAT_CHECK(t.defined(), "norm: undefined tensor");
  REMAT_CHECK(is_floating(t.dtype()), "norm: expected a floating-point tensor, got {} of shape {}",
              t.dtype(), t.shape());
  REMAT_CHECK(p >= 0 || p == -std::numeric_limits<double>::infinity(),
              "norm: the order p must be >= 0 or infinite, got {}", p);
  auto d = reduced_dims("norm", dims, t.dim());
  if (std::isinf(p))
    for (auto i : d)
      REMAT_CHECK(t.shape()[i] > 0, "norm: an infinite order over the empty dim {} of shape {}", i,
                  t.shape());
  return call1(std::make_shared<NormOp>(p, std::move(d), keepdim), {t});
}

Tensor logsumexp(const Tensor& t, std::int64_t dim, bool keepdim) {
  REMAT_CHECK(t.defined() && is_floating(t.dtype()), "logsumexp: expected a floating-point tensor");
  // Shifted by the (constant) maximum for stability; an infinite maximum shifts by 0, as PyTorch.
  Tensor m = detach(max(t, dim, true).first);
  m = where(eq(abs(m), std::numeric_limits<double>::infinity()), zeros_like(m), m);
  Tensor r = add(log(sum(exp(sub(t, m)), {dim}, true)), m);
  return keepdim ? r : squeeze(r, dim);
}

Tensor sum(const Tensor& t, std::vector<std::int64_t> dims, bool keepdim) {
  auto d = reduced_dims("sum", dims, t.dim());
  return call1(std::make_shared<SumOp>(std::move(d), keepdim), {t});
}

Tensor mean(const Tensor& t, std::vector<std::int64_t> dims, bool keepdim) {
  REMAT_CHECK(is_floating(t.dtype()), "mean: expected a floating-point tensor, got {}", t.dtype());
  auto d = reduced_dims("mean", dims, t.dim());
  std::int64_t n = 1;
  for (auto i : d) n *= t.shape()[i];
  return div(sum(t, d, keepdim), static_cast<double>(n));
}

Tensor var(const Tensor& t, std::vector<std::int64_t> dims, std::int64_t correction, bool keepdim) {
  REMAT_CHECK(is_floating(t.dtype()), "var: expected a floating-point tensor, got {}", t.dtype());
  auto d = reduced_dims("var", dims, t.dim());
  std::int64_t n = 1;
  for (auto i : d) n *= t.shape()[i];
  Tensor centered = sub(t, mean(t, d, true));
  const double denom = static_cast<double>(std::max<std::int64_t>(n - correction, 0));
  return div(sum(mul(centered, centered), d, keepdim), denom);
}

std::pair<Tensor, Tensor> max(const Tensor& t, std::int64_t dim, bool keepdim) {
  return extreme(true, t, dim, keepdim);
}
std::pair<Tensor, Tensor> min(const Tensor& t, std::int64_t dim, bool keepdim) {
  return extreme(false, t, dim, keepdim);
}
Tensor max(const Tensor& t) {
  return extreme_all(true, t);
}
Tensor min(const Tensor& t) {
  return extreme_all(false, t);
}
Tensor argmax(const Tensor& t, std::int64_t dim, bool keepdim) {
  return extreme(true, t, dim, keepdim).second;
}
Tensor argmin(const Tensor& t, std::int64_t dim, bool keepdim) {
  return extreme(false, t, dim, keepdim).second;
}

Tensor sum_to(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  const std::int64_t lead = t.dim() - static_cast<std::int64_t>(shape.size());
  REMAT_CHECK(lead >= 0, "sum_to: cannot sum shape {} to {}", t.shape(), shape);
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    if (d < lead)
      dims.push_back(d);
    else if (shape[d - lead] == 1 && t.shape()[d] != 1)
      dims.push_back(d);
    else
      REMAT_CHECK(shape[d - lead] == t.shape()[d], "sum_to: cannot sum shape {} to {}", t.shape(),
                  shape);
  }
  Tensor s = dims.empty() ? t : sum(t, dims, true);
  return reshape(s, shape);
}

}  // namespace remat
