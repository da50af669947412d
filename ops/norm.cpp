#include "ops/norm.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "autograd/grad_mode.h"
#include "ops/cpu/lane_sum.h"
#include "ops/cpu/loops.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/op.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace remat {
namespace {

using detail::lane_sum;

// Sum of squared deviations from `mean` (two-pass variance: no cancellation when |mean| >> std).
template <class T>
double lane_sqdev(const T* p, std::int64_t n, double mean) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) {
      const double d = static_cast<double>(p[i + l]) - mean;
      acc[l] += d * d;
    }
  for (; i < n; ++i) {
    const double d = static_cast<double>(p[i]) - mean;
    acc[i & 7] += d * d;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// What the training forward applies after normalising, in the same pass: y = relu(bn(x) + r).
struct Epilogue {
  bool residual = false, relu = false;
};

// Calls f.template operator()<Relu, Residual>(): the epilogue as template arguments, so the
// kernels' loops have no branch (a conditional load or store keeps them from vectorising).
template <class F>
void dispatch_epilogue(Epilogue e, F&& f) {
  if (e.relu && e.residual)
    f.template operator()<true, true>();
  else if (e.relu)
    f.template operator()<true, false>();
  else if (e.residual)
    f.template operator()<false, true>();
  else
    f.template operator()<false, false>();
}

// Both sums batch norm's backward needs, sum(g) and sum(g * (x - mean)), each in lane_sum's
// order, in one pass.
template <class T>
std::pair<double, double> lane_sums_centered(const T* g, const T* x, std::int64_t n, double mean) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, d[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      const double gi = static_cast<double>(g[i + l]);
      s[l] += gi;
      d[l] += gi * (static_cast<double>(x[i + l]) - mean);
    }
  }
  for (; i < n; ++i) {
    const double gi = static_cast<double>(g[i]);
    s[i & 7] += gi;
    d[i & 7] += gi * (static_cast<double>(x[i]) - mean);
  }
  return {((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])),
          ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]))};
}

// [C] -> [1, C, 1, ...] so per-channel values broadcast against an input of rank `ndim`.
Tensor per_channel(const Tensor& t, std::int64_t ndim) {
  Shape s(static_cast<std::size_t>(ndim), 1);
  s[1] = t.numel();
  return reshape(t, s);
}

std::vector<std::int64_t> all_but_channel(std::int64_t ndim) {
  std::vector<std::int64_t> dims{0};
  for (std::int64_t d = 2; d < ndim; ++d) dims.push_back(d);
  return dims;
}

// ------------------------------------------------------------------ batch norm, training
// The first derivative of BatchNormOp in one op (see BatchNormOp::backward for the formula), of
// the gradient g already through the ReLU's mask when the forward ended with one.  Inputs: g, x,
// mean, invstd, and the gradients reaching mean, invstd and var, then the weight when present.
// Outputs: dx, dweight, dbias.  Used only when no graph of the gradient is being built, so it
// needs no derivative of its own.
class BatchNormBackwardOp final : public Op {
 public:
  explicit BatchNormBackwardOp(bool has_weight) : has_weight_(has_weight) {}
  std::string_view name() const override { return "batch_norm_backward"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& x = in[1];
    REMAT_CHECK(in[0].shape == x.shape && in[0].is_contiguous() && x.is_contiguous(),
                "batch_norm_backward: internal error, gradient {} and input {} must be contiguous "
                "and of one shape",
                in[0].shape, x.shape);
    const auto stat = TensorMeta::contiguous({x.shape[1]}, x.dtype, x.device);
    return {TensorMeta::contiguous(x.shape, x.dtype, x.device), stat, stat};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[1].meta;
    const std::int64_t n_batch = m.shape[0], channels = m.shape[1];
    const std::int64_t inner = m.numel() / std::max<std::int64_t>(n_batch * channels, 1);
    const double count = static_cast<double>(n_batch * inner);
    detail::visit_floating(m.dtype, [&]<class T>() {
      const T* g = in[0].data<T>();
      const T* x = in[1].data<T>();
      const T *mean = in[2].data<T>(), *invstd = in[3].data<T>();
      const T *g_mean = in[4].data<T>(), *g_invstd = in[5].data<T>(), *g_var = in[6].data<T>();
      const T* w = has_weight_ ? in[7].data<T>() : nullptr;
      T* gx = out[0].data<T>();
      T* gw = out[1].data<T>();
      T* gb = out[2].data<T>();
      // Per channel: dx = g * scale + (x - mean) * a + k.
      struct Coef {
        T mean, scale, a, k;
      };
      auto coef = [&](std::int64_t c, double sum_g, double sum_gxc) {
        const double is = invstd[c], wc = w ? static_cast<double>(w[c]) : 1.0;
        gw[c] = static_cast<T>(sum_gxc * is);
        gb[c] = static_cast<T>(sum_g);
        const double a = (2.0 * g_var[c] - is * is * is * (wc * sum_gxc + g_invstd[c])) / count;
        const double k = (g_mean[c] - is * wc * sum_g) / count;
        return Coef{mean[c], static_cast<T>(wc * is), static_cast<T>(a), static_cast<T>(k)};
      };
      if (inner == 1) {
        constexpr std::int64_t kBlock = 256;
        const std::int64_t blocks = (channels + kBlock - 1) / kBlock;
        parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
          double sg[kBlock], sgx[kBlock];
          T mu[kBlock], scale[kBlock], a[kBlock], k[kBlock];
          for (std::int64_t blk = b0; blk < b1; ++blk) {
            const std::int64_t c0 = blk * kBlock, width = std::min(kBlock, channels - c0);
            for (std::int64_t j = 0; j < width; ++j) sg[j] = 0, sgx[j] = 0, mu[j] = mean[c0 + j];
            for (std::int64_t n = 0; n < n_batch; ++n) {
              const std::int64_t row = n * channels + c0;
              const T *gr = g + row, *xr = x + row;
#pragma omp simd
              for (std::int64_t j = 0; j < width; ++j) {
                sg[j] += static_cast<double>(gr[j]);
                sgx[j] += static_cast<double>(gr[j]) *
                          (static_cast<double>(xr[j]) - static_cast<double>(mu[j]));
              }
            }
            for (std::int64_t j = 0; j < width; ++j) {
              const Coef cf = coef(c0 + j, sg[j], sgx[j]);
              scale[j] = cf.scale, a[j] = cf.a, k[j] = cf.k;
            }
            for (std::int64_t n = 0; n < n_batch; ++n) {
              const std::int64_t row = n * channels + c0;
              const T *gr = g + row, *xr = x + row;
              T* o = gx + row;
#pragma omp simd
              for (std::int64_t j = 0; j < width; ++j)
                o[j] = gr[j] * scale[j] + (xr[j] - mu[j]) * a[j] + k[j];
            }
          }
        });
        return;
      }
      parallel_for(0, channels, 1, [&](std::int64_t c0, std::int64_t c1) {
        for (std::int64_t c = c0; c < c1; ++c) {
          double sum_g = 0, sum_gxc = 0;
          for (std::int64_t n = 0; n < n_batch; ++n) {
            const std::int64_t off = (n * channels + c) * inner;
            const auto s =
                lane_sums_centered(g + off, x + off, inner, static_cast<double>(mean[c]));
            sum_g += s.first;
            sum_gxc += s.second;
          }
          const Coef cf = coef(c, sum_g, sum_gxc);
          for (std::int64_t n = 0; n < n_batch; ++n) {
            const std::int64_t off = (n * channels + c) * inner;
            const T *gp = g + off, *xp = x + off;
            T* o = gx + off;
#pragma omp simd
            for (std::int64_t i = 0; i < inner; ++i)
              o[i] = gp[i] * cf.scale + (xp[i] - cf.mean) * cf.a + cf.k;
          }
        }
      });
    });
  }

 private:
  bool has_weight_;
};

// The fused training forward.  Inputs: x [N, C, ...] (contiguous), then weight [C] and bias [C]
// when present, then the residual (x's shape, contiguous) when the epilogue adds one.  Outputs:
// y = bn(x) (+ residual, then ReLU when asked), and per channel the batch mean,
// 1 / sqrt(var + eps) and the biased variance (for the running-variance update, which would
// lose digits recovering it from invstd).  With the ReLU, y is kept: its mask is the ReLU's.
class BatchNormOp final : public Op {
 public:
  BatchNormOp(double eps, bool has_weight, bool has_bias, Epilogue e)
      : eps_(eps), has_weight_(has_weight), has_bias_(has_bias), e_(e) {}
  std::string_view name() const override {
    return e_.relu ? (e_.residual ? "batch_norm_add_relu" : "batch_norm_relu") : "batch_norm";
  }
  SaveSpec saves() const override {
    return {has_weight_ ? 0b11u : 0b1u, e_.relu ? 0b111u : 0b110u};
  }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& x = in[0];
    REMAT_CHECK(x.is_contiguous(),
                "batch_norm: internal error, input of shape {} is not contiguous", x.shape);
    const std::size_t params = 1 + has_weight_ + has_bias_, expected = params + e_.residual;
    REMAT_CHECK(in.size() == expected, "batch_norm: expected {} inputs, got {}", expected,
                in.size());
    if (e_.residual)
      REMAT_CHECK(
          in[params].shape == x.shape && in[params].dtype == x.dtype && in[params].is_contiguous(),
          "batch_norm: residual of shape {} ({}) does not match input of shape {} ({})",
          in[params].shape, in[params].dtype, x.shape, x.dtype);
    for (std::size_t i = 1; i < params; ++i)
      REMAT_CHECK(
          in[i].is_contiguous() && in[i].shape == Shape{x.shape[1]} && in[i].dtype == x.dtype,
          "batch_norm: parameter {} of shape {} ({}) does not fit input of shape {} ({})", i,
          in[i].shape, in[i].dtype, x.shape, x.dtype);
    const auto stat = TensorMeta::contiguous({x.shape[1]}, x.dtype, x.device);
    return {TensorMeta::contiguous(x.shape, x.dtype, x.device), stat, stat, stat};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    dispatch_epilogue(e_, [&]<bool Relu, bool Residual>() { run<Relu, Residual>(in, out); });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override;

 private:
  // y = (x - mean) * scale + shift, plus the residual, then the ReLU (NaN passes, as relu).
  template <bool Relu, bool Residual, class T>
  [[gnu::always_inline]] static T epilogue(T v, const T* r, std::int64_t i) {
    if constexpr (Residual) v += r[i];
    if constexpr (Relu) v = (v > T(0)) | (v != v) ? v : T(0);
    return v;
  }

  template <bool Relu, bool Residual>
  void run(std::span<const KernelArg> in, std::span<const KernelArg> out) const {
    const TensorMeta& m = *in[0].meta;
    const std::int64_t n_batch = m.shape[0], channels = m.shape[1];
    const std::int64_t inner = m.numel() / std::max<std::int64_t>(n_batch * channels, 1);
    const double count = static_cast<double>(n_batch * inner);
    detail::visit_floating(m.dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      const T* w = has_weight_ ? in[1].data<T>() : nullptr;
      const T* b = has_bias_ ? in[1 + has_weight_].data<T>() : nullptr;
      const T* res = Residual ? in[1 + has_weight_ + has_bias_].data<T>() : nullptr;
      T* y = out[0].data<T>();
      T* mean_out = out[1].data<T>();
      T* invstd_out = out[2].data<T>();
      T* var_out = out[3].data<T>();
      if (inner == 1) {
        // [N, C]: walk rows and vectorise across a block of channels.
        constexpr std::int64_t kBlock = 256;
        const std::int64_t blocks = (channels + kBlock - 1) / kBlock;
        parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
          double s[kBlock], q[kBlock];
          T mu[kBlock], scale[kBlock], shift[kBlock];
          for (std::int64_t blk = b0; blk < b1; ++blk) {
            const std::int64_t c0 = blk * kBlock, width = std::min(kBlock, channels - c0);
            std::fill(s, s + width, 0.0);
            std::fill(q, q + width, 0.0);
            for (std::int64_t n = 0; n < n_batch; ++n) {
              const T* row = x + n * channels + c0;
#pragma omp simd
              for (std::int64_t j = 0; j < width; ++j) s[j] += static_cast<double>(row[j]);
            }
            for (std::int64_t j = 0; j < width; ++j) s[j] /= count;
            for (std::int64_t n = 0; n < n_batch; ++n) {
              const T* row = x + n * channels + c0;
#pragma omp simd
              for (std::int64_t j = 0; j < width; ++j) {
                const double d = static_cast<double>(row[j]) - s[j];
                q[j] += d * d;
              }
            }
            for (std::int64_t j = 0; j < width; ++j) {
              const std::int64_t c = c0 + j;
              const double var = q[j] / count, invstd = 1.0 / std::sqrt(var + eps_);
              mean_out[c] = static_cast<T>(s[j]);
              invstd_out[c] = static_cast<T>(invstd);
              var_out[c] = static_cast<T>(var);
              mu[j] = static_cast<T>(s[j]);
              scale[j] = static_cast<T>(w ? invstd * static_cast<double>(w[c]) : invstd);
              shift[j] = b ? b[c] : T(0);
            }
            for (std::int64_t n = 0; n < n_batch; ++n) {
              const T* row = x + n * channels + c0;
              T* o = y + n * channels + c0;
              const T* r = Residual ? res + n * channels + c0 : nullptr;
#pragma omp simd
              for (std::int64_t j = 0; j < width; ++j)
                o[j] = epilogue<Relu, Residual>(
                    static_cast<T>((row[j] - mu[j]) * scale[j] + shift[j]), r, j);
            }
          }
        });
        return;
      }
      parallel_for(0, channels, 1, [&](std::int64_t c0, std::int64_t c1) {
        for (std::int64_t c = c0; c < c1; ++c) {
          double s = 0;
          for (std::int64_t n = 0; n < n_batch; ++n)
            s += lane_sum(x + (n * channels + c) * inner, inner);
          const double mean = s / count;
          double q = 0;
          for (std::int64_t n = 0; n < n_batch; ++n)
            q += lane_sqdev(x + (n * channels + c) * inner, inner, mean);
          const double var = q / count, invstd = 1.0 / std::sqrt(var + eps_);
          mean_out[c] = static_cast<T>(mean);
          invstd_out[c] = static_cast<T>(invstd);
          var_out[c] = static_cast<T>(var);
          const T mu = static_cast<T>(mean);
          const T scale = static_cast<T>(w ? invstd * static_cast<double>(w[c]) : invstd);
          const T shift = b ? b[c] : T(0);
          for (std::int64_t n = 0; n < n_batch; ++n) {
            const std::int64_t off = (n * channels + c) * inner;
            const T* p = x + off;
            T* o = y + off;
            const T* r = Residual ? res + off : nullptr;
#pragma omp simd
            for (std::int64_t i = 0; i < inner; ++i)
              o[i] = epilogue<Relu, Residual>(static_cast<T>((p[i] - mu) * scale + shift), r, i);
          }
        }
      });
    });
  }
  double eps_;
  bool has_weight_, has_bias_;
  Epilogue e_;
};

// With xc = x - mean, M values per channel and gy = g * weight:
//   dx = invstd * gy - invstd * sum(gy) / M - invstd^3 * xc * sum(gy * xc) / M
// plus the paths through the statistics outputs (they carry gradient when a second
// derivative differentiates through them): d mean = 1/M, d invstd = -invstd^3 xc / M,
// d var = 2 xc / M.
// Without create_graph (ordinary training) one kernel computes the same formula in two passes
// over x; with it, the public ops below build a differentiable graph.  Either way the ReLU's mask
// is applied first, by its own call: a fused kernel would hold g, x, y, dx (and the residual's
// gradient) at once, which sets the smallest budget a ResNet can train under; split, each call
// holds three full-size tensors, and the residual's gradient is the masked g itself.
std::vector<Tensor> BatchNormOp::backward(const BackwardContext& c) const {
  const Tensor& x = c.input(0);
  const std::int64_t nd = x.dim(), channels = x.size(1);
  const std::size_t residual = 1 + has_weight_ + has_bias_;  // the residual's input index
  // The gradient of the normalised value: through the ReLU's mask (its output), when there is
  // one; the incoming gradient is then let go, as nothing below reads it.
  const Tensor g = e_.relu ? relu_backward(c.take_grad(0), c.output(0)) : c.grad(0);
  if (!GradMode::is_enabled()) {
    std::vector<Tensor> in{contiguous(g),         x,
                           c.output(1),           c.output(2),
                           contiguous(c.grad(1)), contiguous(c.grad(2)),
                           contiguous(c.grad(3))};
    if (has_weight_) in.push_back(c.input(1));
    auto out = call(std::make_shared<BatchNormBackwardOp>(has_weight_), std::move(in));
    std::vector<Tensor> grads{c.needs(0) ? out[0] : Tensor()};
    if (has_weight_) grads.push_back(c.needs(1) ? out[1] : Tensor());
    if (has_bias_) grads.push_back(c.needs(1 + has_weight_) ? out[2] : Tensor());
    if (e_.residual) grads.push_back(c.needs(residual) ? g : Tensor());
    return grads;
  }
  const double count = static_cast<double>(x.numel() / channels);
  const auto dims = all_but_channel(nd);
  Tensor mean = per_channel(c.output(1), nd), invstd = per_channel(c.output(2), nd);
  Tensor w = has_weight_ ? per_channel(c.input(1), nd) : Tensor();
  Tensor xc = sub(x, mean);
  Tensor sum_g = sum(g, dims, true);
  Tensor sum_gxc = sum(mul(g, xc), dims, true);
  std::vector<Tensor> grads(1);
  if (c.needs(0)) {
    Tensor sum_gy = has_weight_ ? mul(sum_g, w) : sum_g;
    Tensor sum_gyxc = has_weight_ ? mul(sum_gxc, w) : sum_gxc;
    Tensor i3 = mul(mul(invstd, invstd), invstd);
    Tensor g_mean = per_channel(c.grad(1), nd), g_invstd = per_channel(c.grad(2), nd),
           g_var = per_channel(c.grad(3), nd);
    // Per-channel coefficients, so the full-size work is g * scale + xc * coef_xc + coef_const.
    Tensor coef_xc = div(sub(mul(g_var, 2.0), mul(i3, add(sum_gyxc, g_invstd))), count);
    Tensor coef_const = div(sub(g_mean, mul(invstd, sum_gy)), count);
    Tensor scale = has_weight_ ? mul(w, invstd) : invstd;
    grads[0] = add(add(mul(g, scale), mul(xc, coef_xc)), coef_const);
  }
  if (has_weight_)
    grads.push_back(c.needs(1) ? reshape(mul(sum_gxc, invstd), {channels}) : Tensor());
  if (has_bias_) grads.push_back(c.needs(1 + has_weight_) ? reshape(sum_g, {channels}) : Tensor());
  if (e_.residual) grads.push_back(c.needs(residual) ? g : Tensor());
  return grads;
}

// ------------------------------------------------------------------ per-channel affine
// y = x * scale[c] + shift[c]: batch norm in evaluation, in one pass over x.
class ChannelAffineOp final : public Op {
 public:
  std::string_view name() const override { return "batch_norm_eval"; }
  SaveSpec saves() const override { return {0b011, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& x = in[0];
    REMAT_CHECK(x.is_contiguous(),
                "batch_norm: internal error, input of shape {} is not contiguous", x.shape);
    for (std::size_t i = 1; i < 3; ++i)
      REMAT_CHECK(
          in[i].is_contiguous() && in[i].shape == Shape{x.shape[1]} && in[i].dtype == x.dtype,
          "batch_norm: per-channel tensor of shape {} ({}) does not fit input of shape {} ({})",
          in[i].shape, in[i].dtype, x.shape, x.dtype);
    return {TensorMeta::contiguous(x.shape, x.dtype, x.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    const std::int64_t channels = m.shape[1];
    const std::int64_t outer = m.shape[0] * channels;
    const std::int64_t inner = m.numel() / std::max<std::int64_t>(outer, 1);
    detail::visit_floating(m.dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      const T* scale = in[1].data<T>();
      const T* shift = in[2].data<T>();
      T* y = out[0].data<T>();
      if (inner == 1) {
        parallel_for(0, m.shape[0], grain_for(channels), [&](std::int64_t r0, std::int64_t r1) {
          for (std::int64_t r = r0; r < r1; ++r) {
#pragma omp simd
            for (std::int64_t c = 0; c < channels; ++c)
              y[r * channels + c] = x[r * channels + c] * scale[c] + shift[c];
          }
        });
        return;
      }
      parallel_for(0, outer, grain_for(inner), [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r) {
          const T s = scale[r % channels], t = shift[r % channels];
          const T* p = x + r * inner;
          T* o = y + r * inner;
#pragma omp simd
          for (std::int64_t i = 0; i < inner; ++i) o[i] = p[i] * s + t;
        }
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    const std::int64_t nd = g.dim(), channels = g.size(1);
    const auto dims = all_but_channel(nd);
    Tensor gx = c.needs(0) ? mul(g, per_channel(c.input(1), nd)) : Tensor();
    Tensor gscale = c.needs(1) ? reshape(sum(mul(g, c.input(0)), dims), {channels}) : Tensor();
    Tensor gshift = c.needs(2) ? reshape(sum(g, dims), {channels}) : Tensor();
    return {gx, gscale, gshift};
  }
};

// ------------------------------------------------------------------ layer norm
// Sums of gy and gy * (x - mean) over one row, gy = g * w (or g when w is null).
template <class T>
void row_sums(const T* g, const T* w, const T* x, std::int64_t n, double mean, double& sum_gy,
              double& sum_gyxc) {
  // Eight lanes each, as lane_sum: a fixed order, and the 8-wide body vectorises (the weight's
  // presence is a template argument, so the body has no branch).
  auto run = [&]<bool W>() {
    double s1[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s2[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int l = 0; l < 8; ++l) {
        double gy = static_cast<double>(g[i + l]);
        if constexpr (W) gy *= static_cast<double>(w[i + l]);
        s1[l] += gy;
        s2[l] += gy * (static_cast<double>(x[i + l]) - mean);
      }
    }
    for (; i < n; ++i) {
      double gy = static_cast<double>(g[i]);
      if constexpr (W) gy *= static_cast<double>(w[i]);
      s1[i & 7] += gy;
      s2[i & 7] += gy * (static_cast<double>(x[i]) - mean);
    }
    sum_gy = ((s1[0] + s1[1]) + (s1[2] + s1[3])) + ((s1[4] + s1[5]) + (s1[6] + s1[7]));
    sum_gyxc = ((s2[0] + s2[1]) + (s2[2] + s2[3])) + ((s2[4] + s2[5]) + (s2[6] + s2[7]));
  };
  if (w)
    run.template operator()<true>();
  else
    run.template operator()<false>();
}

// The first derivative of LayerNormOp in one op (formula in LayerNormOp::backward).  Inputs:
// g, x, mean, rstd, the gradients reaching mean and rstd, then the weight when present.
// Outputs: dx, and when the layer has parameters, dweight and dbias.  Used only when no graph of
// the gradient is being built, so it needs no derivative of its own.
class LayerNormBackwardOp final : public Op {
 public:
  LayerNormBackwardOp(std::int64_t norm_dims, bool has_weight, bool param_grads)
      : norm_dims_(norm_dims), has_weight_(has_weight), param_grads_(param_grads) {}
  std::string_view name() const override { return "layer_norm_backward"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& x = in[1];
    REMAT_CHECK(in[0].shape == x.shape && in[0].is_contiguous() && x.is_contiguous(),
                "layer_norm_backward: internal error, gradient {} and input {} must be contiguous "
                "and of one shape",
                in[0].shape, x.shape);
    std::vector<TensorMeta> out{TensorMeta::contiguous(x.shape, x.dtype, x.device)};
    if (param_grads_) {
      const Shape p(x.shape.end() - norm_dims_, x.shape.end());
      out.push_back(TensorMeta::contiguous(p, x.dtype, x.device));
      out.push_back(TensorMeta::contiguous(p, x.dtype, x.device));
    }
    return out;
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[1].meta;
    std::int64_t row = 1;
    for (std::int64_t d = m.dim() - norm_dims_; d < m.dim(); ++d) row *= m.shape[d];
    const std::int64_t rows = row == 0 ? 0 : m.numel() / row;
    // Weight and bias gradients sum over rows: each fixed block of rows writes its own partial
    // sums, added in block order, so the result does not depend on the thread count.
    const std::int64_t block_rows = std::max<std::int64_t>(32, (rows + 255) / 256);
    const std::int64_t blocks = (rows + block_rows - 1) / block_rows;
    std::vector<double> part_w, part_b;
    if (param_grads_) part_w.assign(blocks * row, 0.0), part_b.assign(blocks * row, 0.0);
    detail::visit_floating(m.dtype, [&]<class T>() {
      const T* g = in[0].data<T>();
      const T* x = in[1].data<T>();
      const T *mean = in[2].data<T>(), *rstd = in[3].data<T>();
      const T *g_mean = in[4].data<T>(), *g_rstd = in[5].data<T>();
      const T* w = has_weight_ ? in[6].data<T>() : nullptr;
      T* gx = out[0].data<T>();
      const double count = static_cast<double>(row);
      parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t blk = b0; blk < b1; ++blk) {
          double* pw = param_grads_ ? part_w.data() + blk * row : nullptr;
          double* pb = param_grads_ ? part_b.data() + blk * row : nullptr;
          for (std::int64_t r = blk * block_rows; r < std::min(rows, (blk + 1) * block_rows); ++r) {
            const T *gp = g + r * row, *xp = x + r * row;
            T* o = gx + r * row;
            const double mu = mean[r], rs = rstd[r];
            double sum_gy, sum_gyxc;
            row_sums(gp, w, xp, row, mu, sum_gy, sum_gyxc);
            const T a = static_cast<T>(-(rs * rs * rs * (sum_gyxc + g_rstd[r])) / count);
            const T k = static_cast<T>((g_mean[r] - rs * sum_gy) / count);
            const T tmu = mean[r], trs = rstd[r];
            if (w) {
#pragma omp simd
              for (std::int64_t i = 0; i < row; ++i)
                o[i] = gp[i] * w[i] * trs + (xp[i] - tmu) * a + k;
            } else {
#pragma omp simd
              for (std::int64_t i = 0; i < row; ++i) o[i] = gp[i] * trs + (xp[i] - tmu) * a + k;
            }
            if (pw) {
#pragma omp simd
              for (std::int64_t i = 0; i < row; ++i) {
                const double gi = gp[i];
                pw[i] += gi * ((static_cast<double>(xp[i]) - mu) * rs);
                pb[i] += gi;
              }
            }
          }
        }
      });
      if (!param_grads_) return;
      T* gw = out[1].data<T>();
      T* gb = out[2].data<T>();
      parallel_for(0, row, 1024, [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i) {
          double sw = 0, sb = 0;
          for (std::int64_t blk = 0; blk < blocks; ++blk)
            sw += part_w[blk * row + i], sb += part_b[blk * row + i];
          gw[i] = static_cast<T>(sw);
          gb[i] = static_cast<T>(sb);
        }
      });
    });
  }

 private:
  std::int64_t norm_dims_;
  bool has_weight_, param_grads_;
};

// Inputs: x (contiguous), then weight and bias (shape normalized_shape) when present.
// Outputs: y, and per row (shape x.shape[:-k] + [1] * k) the mean and 1 / sqrt(var + eps).
class LayerNormOp final : public Op {
 public:
  LayerNormOp(std::int64_t norm_dims, double eps, bool has_weight, bool has_bias)
      : norm_dims_(norm_dims), eps_(eps), has_weight_(has_weight), has_bias_(has_bias) {}
  std::string_view name() const override { return "layer_norm"; }
  SaveSpec saves() const override { return {has_weight_ ? 0b11u : 0b1u, 0b110}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& x = in[0];
    REMAT_CHECK(x.is_contiguous(),
                "layer_norm: internal error, input of shape {} is not contiguous", x.shape);
    Shape stat = x.shape;
    for (std::int64_t d = x.dim() - norm_dims_; d < x.dim(); ++d) stat[d] = 1;
    const auto s = TensorMeta::contiguous(stat, x.dtype, x.device);
    return {TensorMeta::contiguous(x.shape, x.dtype, x.device), s, s};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    std::int64_t row = 1;
    for (std::int64_t d = m.dim() - norm_dims_; d < m.dim(); ++d) row *= m.shape[d];
    const std::int64_t rows = row == 0 ? 0 : m.numel() / row;
    detail::visit_floating(m.dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      const T* w = has_weight_ ? in[1].data<T>() : nullptr;
      const T* b = has_bias_ ? in[1 + has_weight_].data<T>() : nullptr;
      T* y = out[0].data<T>();
      T* mean_out = out[1].data<T>();
      T* rstd_out = out[2].data<T>();
      parallel_for(0, rows, grain_for(row), [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r) {
          const T* p = x + r * row;
          T* o = y + r * row;
          const double mean = lane_sum(p, row) / static_cast<double>(row);
          const double var = lane_sqdev(p, row, mean) / static_cast<double>(row);
          const double rstd = 1.0 / std::sqrt(var + eps_);
          mean_out[r] = static_cast<T>(mean);
          rstd_out[r] = static_cast<T>(rstd);
          const T mu = static_cast<T>(mean), rs = static_cast<T>(rstd);
          if (w && b) {
#pragma omp simd
            for (std::int64_t i = 0; i < row; ++i) o[i] = (p[i] - mu) * rs * w[i] + b[i];
          } else if (w) {
#pragma omp simd
            for (std::int64_t i = 0; i < row; ++i) o[i] = (p[i] - mu) * rs * w[i];
          } else if (b) {
#pragma omp simd
            for (std::int64_t i = 0; i < row; ++i) o[i] = (p[i] - mu) * rs + b[i];
          } else {
#pragma omp simd
            for (std::int64_t i = 0; i < row; ++i) o[i] = (p[i] - mu) * rs;
          }
        }
      });
    });
  }
  // The batch-norm formula with the roles of dims swapped: statistics per row over the last
  // norm_dims_ dims (count N), weight and bias gradients summed over the leading dims.
  // Without create_graph a fused kernel computes it; with it, public ops build the graph.
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& x = c.input(0);
    if (!GradMode::is_enabled()) {
      const bool params = has_weight_ || has_bias_;
      std::vector<Tensor> in{contiguous(c.grad(0)), x,
                             c.output(1),           c.output(2),
                             contiguous(c.grad(1)), contiguous(c.grad(2))};
      if (has_weight_) in.push_back(c.input(1));
      auto out = call(std::make_shared<LayerNormBackwardOp>(norm_dims_, has_weight_, params),
                      std::move(in));
      std::vector<Tensor> grads{c.needs(0) ? out[0] : Tensor()};
      if (has_weight_) grads.push_back(c.needs(1) ? out[1] : Tensor());
      if (has_bias_) grads.push_back(c.needs(1 + has_weight_) ? out[2] : Tensor());
      return grads;
    }
    const std::int64_t nd = x.dim(), lead = nd - norm_dims_;
    std::vector<std::int64_t> norm_dims, lead_dims;
    for (std::int64_t d = 0; d < nd; ++d) (d < lead ? lead_dims : norm_dims).push_back(d);
    double count = 1;
    for (auto d : norm_dims) count *= static_cast<double>(x.size(d));
    // sum over the leading dims; with none, the tensor itself already has the parameter's shape.
    auto sum_lead = [&](const Tensor& t) { return lead_dims.empty() ? t : sum(t, lead_dims); };

    const Tensor& g = c.grad(0);
    const Tensor& mean = c.output(1);
    const Tensor& rstd = c.output(2);
    Tensor xc = sub(x, mean);
    std::vector<Tensor> grads(1);
    if (c.needs(0)) {
      Tensor gy = has_weight_ ? mul(g, c.input(1)) : g;
      Tensor sum_gy = sum(gy, norm_dims, true);
      Tensor sum_gyxc = sum(mul(gy, xc), norm_dims, true);
      Tensor r3 = mul(mul(rstd, rstd), rstd);
      Tensor coef_xc = neg(div(mul(r3, add(sum_gyxc, c.grad(2))), count));
      Tensor coef_const = div(sub(c.grad(1), mul(rstd, sum_gy)), count);
      grads[0] = add(add(mul(gy, rstd), mul(xc, coef_xc)), coef_const);
    }
    if (has_weight_) grads.push_back(c.needs(1) ? sum_lead(mul(g, mul(xc, rstd))) : Tensor());
    if (has_bias_) grads.push_back(c.needs(1 + has_weight_) ? sum_lead(g) : Tensor());
    return grads;
  }

 private:
  std::int64_t norm_dims_;
  double eps_;
  bool has_weight_, has_bias_;
};

void check_param(std::string_view op, std::string_view what, const Tensor& p, const Shape& shape,
                 const Tensor& x) {
  if (!p.defined()) return;
  REMAT_CHECK(p.shape() == shape,
              "{}: {} of shape {} does not fit input of shape {} (expected shape {})", op, what,
              p.shape(), x.shape(), shape);
  REMAT_CHECK(p.dtype() == x.dtype(), "{}: {} has dtype {} but the input has dtype {} (shape {})",
              op, what, p.dtype(), x.dtype(), x.shape());
  REMAT_CHECK(p.device() == x.device(), "{}: {} is on {} but the input is on {}", op, what,
              p.device(), x.device());
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  std::optional<double> momentum, double eps, const Tensor& num_batches_tracked,
                  const BatchNormEpilogue& epilogue) {
  REMAT_CHECK(x.defined(), "batch_norm: the input is an undefined tensor");
  REMAT_CHECK(x.dim() >= 2,
              "batch_norm: expected an input of rank >= 2 ([N, C, ...]), got shape {}", x.shape());
  REMAT_CHECK(is_floating(x.dtype()),
              "batch_norm: expected a floating-point input, got {} of shape {}", x.dtype(),
              x.shape());
  REMAT_CHECK(eps >= 0 && std::isfinite(eps), "batch_norm: eps must be finite and >= 0, got {}",
              eps);
  const std::int64_t channels = x.size(1);
  const Shape per_c{channels};
  check_param("batch_norm", "weight", weight, per_c, x);
  check_param("batch_norm", "bias", bias, per_c, x);
  check_param("batch_norm", "running_mean", running_mean, per_c, x);
  check_param("batch_norm", "running_var", running_var, per_c, x);
  REMAT_CHECK(running_mean.defined() == running_var.defined(),
              "batch_norm: running_mean and running_var must both be defined or both undefined");
  REMAT_CHECK(!momentum || std::isfinite(*momentum), "batch_norm: momentum must be finite, got {}",
              momentum.value_or(0));
  REMAT_CHECK(!num_batches_tracked.defined() ||
                  (num_batches_tracked.dtype() == DType::Int64 && num_batches_tracked.dim() == 0),
              "batch_norm: num_batches_tracked must be an int64 scalar, got {} of shape {}",
              num_batches_tracked.dtype(), num_batches_tracked.shape());
  REMAT_CHECK(momentum || !training || !running_mean.defined() || num_batches_tracked.defined(),
              "batch_norm: momentum std::nullopt (a cumulative average) needs num_batches_tracked");
  const Tensor& residual = epilogue.residual;
  if (residual.defined())
    REMAT_CHECK(residual.shape() == x.shape() && residual.dtype() == x.dtype() &&
                    residual.device() == x.device(),
                "batch_norm: the residual ({} of shape {} on {}) must match the input ({} of "
                "shape {} on {})",
                residual.dtype(), residual.shape(), residual.device(), x.dtype(), x.shape(),
                x.device());
  // Evaluation applies the epilogue as separate ops.
  auto finish = [&](Tensor y) {
    if (residual.defined()) y = add(y, residual);
    return epilogue.relu ? relu(y) : y;
  };

  if (!training) {
    REMAT_CHECK(
        running_mean.defined(),
        "batch_norm: evaluation mode needs running_mean and running_var (input of shape {})",
        x.shape());
    // Per-channel work only; the one pass over x is the fused affine op.
    Tensor invstd = rsqrt(add(running_var, eps));
    Tensor scale = weight.defined() ? mul(weight, invstd) : invstd;
    Tensor shift = neg(mul(running_mean, scale));
    if (bias.defined()) shift = add(shift, bias);
    static const auto affine = std::make_shared<ChannelAffineOp>();
    return finish(call1(affine, {contiguous(x), contiguous(scale), contiguous(shift)}));
  }

  const std::int64_t count = x.numel() / std::max<std::int64_t>(channels, 1);
  REMAT_CHECK(
      count > 1,
      "batch_norm: expected more than 1 value per channel when training, got input of shape {}",
      x.shape());
  std::vector<Tensor> inputs{contiguous(x)};
  if (weight.defined()) inputs.push_back(contiguous(weight));
  if (bias.defined()) inputs.push_back(contiguous(bias));
  if (residual.defined()) inputs.push_back(contiguous(residual));
  const Epilogue e{.residual = residual.defined(), .relu = epilogue.relu};
  auto outs = call(std::make_shared<BatchNormOp>(eps, weight.defined(), bias.defined(), e),
                   std::move(inputs));
  if (running_mean.defined()) {
    // A side effect: separate in-place ops, never part of the output's record or graph, so a
    // replay of the forward does not update the statistics again (DESIGN.md section 4).
    NoGradGuard no_grad;
    if (num_batches_tracked.defined()) add_(num_batches_tracked, 1.0);
    const double factor =
        momentum ? *momentum : 1.0 / static_cast<double>(num_batches_tracked.item<std::int64_t>());
    const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
    mul_(running_mean, 1.0 - factor);
    add_(running_mean, outs[1], factor);
    mul_(running_var, 1.0 - factor);
    add_(running_var, outs[3], factor * unbias);
  }
  return outs[0];
}

Tensor layer_norm(const Tensor& x, const std::vector<std::int64_t>& normalized_shape,
                  const Tensor& weight, const Tensor& bias, double eps) {
  REMAT_CHECK(x.defined(), "layer_norm: the input is an undefined tensor");
  REMAT_CHECK(is_floating(x.dtype()),
              "layer_norm: expected a floating-point input, got {} of shape {}", x.dtype(),
              x.shape());
  REMAT_CHECK(eps >= 0 && std::isfinite(eps), "layer_norm: eps must be finite and >= 0, got {}",
              eps);
  const auto k = static_cast<std::int64_t>(normalized_shape.size());
  REMAT_CHECK(k >= 1, "layer_norm: normalized_shape must name at least one dim (input of shape {})",
              x.shape());
  bool fits = k <= x.dim();
  for (std::int64_t i = 0; fits && i < k; ++i)
    fits = x.size(x.dim() - k + i) == normalized_shape[i];
  REMAT_CHECK(
      fits, "layer_norm: normalized_shape {} does not match the trailing dims of input of shape {}",
      normalized_shape, x.shape());
  check_param("layer_norm", "weight", weight, normalized_shape, x);
  check_param("layer_norm", "bias", bias, normalized_shape, x);
  std::vector<Tensor> inputs{contiguous(x)};
  if (weight.defined()) inputs.push_back(contiguous(weight));
  if (bias.defined()) inputs.push_back(contiguous(bias));
  return call(std::make_shared<LayerNormOp>(k, eps, weight.defined(), bias.defined()),
              std::move(inputs))[0];
}

}  // namespace remat
