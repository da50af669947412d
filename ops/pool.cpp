#include "ops/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/loops.h"
#include "ops/index.h"
#include "ops/op.h"
#include "ops/view.h"

namespace remat {
namespace {

struct Pool2dParams {
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::int64_t divisor = 0;  // 0: no override
};

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// PyTorch's pooling_output_shape: with ceil_mode the last window must start inside the input
// or its left padding.
std::int64_t pooled_size(std::int64_t in, std::int64_t k, std::int64_t pad, std::int64_t s,
                         std::int64_t d, bool ceil_mode) {
  std::int64_t out = floor_div(in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) --out;
  return out;
}

// Output shape of pooling an [N, C, H, W] input; validates the parameters, naming `op`.
Shape pooled_shape(std::string_view op, const TensorMeta& x, const Pool2dParams& p, bool dilated) {
  REMAT_CHECK(is_floating(x.dtype), "{}: expected a float32 or float64 input, got {} of shape {}",
              op, x.dtype, x.shape);
  REMAT_CHECK(x.dim() == 4, "{}: expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got shape {}",
              op, x.shape);
  REMAT_CHECK(
      p.kh > 0 && p.kw > 0 && p.sh > 0 && p.sw > 0 && p.dh > 0 && p.dw > 0 && p.ph >= 0 &&
          p.pw >= 0,
      "{}: kernel ({}, {}), stride ({}, {}) and dilation ({}, {}) must be positive and padding "
      "({}, {}) non-negative (input shape {})",
      op, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.ph, p.pw, x.shape);
  const std::int64_t eh = dilated ? ((p.kh - 1) * p.dh + 1) / 2 : p.kh / 2;
  const std::int64_t ew = dilated ? ((p.kw - 1) * p.dw + 1) / 2 : p.kw / 2;
  REMAT_CHECK(p.ph <= std::min(p.kh / 2, eh) && p.pw <= std::min(p.kw / 2, ew),
              "{}: padding ({}, {}) must be at most half the kernel ({}, {}) (input shape {})", op,
              p.ph, p.pw, p.kh, p.kw, x.shape);
  const std::int64_t oh = pooled_size(x.shape[2], p.kh, p.ph, p.sh, p.dh, p.ceil_mode);
  const std::int64_t ow = pooled_size(x.shape[3], p.kw, p.pw, p.sw, p.dw, p.ceil_mode);
  REMAT_CHECK(oh >= 1 && ow >= 1,
              "{}: input of shape {} is too small for kernel ({}, {}) with padding ({}, {}) and "
              "dilation ({}, {}) (output would be {}x{})",
              op, x.shape, p.kh, p.kw, p.ph, p.pw, p.dh, p.dw, oh, ow);
  return {x.shape[0], x.shape[1], oh, ow};
}

// Runs f(plane) for every (n, c) plane, spread over threads.
template <class F>
void for_planes(std::int64_t planes, std::int64_t work_per_plane, F&& f) {
  parallel_for(0, planes, grain_for(work_per_plane), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) f(i);
  });
}

struct Planes {
  std::int64_t count, h, w, oh, ow;
  Planes(const Shape& in, const Shape& out)
      : count(in[0] * in[1]), h(in[2]), w(in[3]), oh(out[2]), ow(out[3]) {}
};

// ---------------------------------------------------------------- max pooling
class MaxPool2dBackwardOp;
Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape);

class MaxPool2dOp final : public Op {
 public:
  explicit MaxPool2dOp(Pool2dParams p) : p_(p) {}
  std::string_view name() const override { return "max_pool2d"; }
  SaveSpec saves() const override { return {0, 0b10}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    Shape s = pooled_shape("max_pool2d", in[0], p_, true);
    return {TensorMeta::contiguous(s, in[0].dtype, in[0].device),
            TensorMeta::contiguous(s, DType::Int64, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Planes pl(in[0].meta->shape, out[0].meta->shape);
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      std::int64_t* idx = out[1].data<std::int64_t>();
      for_planes(pl.count, pl.oh * pl.ow * p_.kh * p_.kw, [&](std::int64_t plane) {
        const T* xp = x + plane * pl.h * pl.w;
        T* yp = y + plane * pl.oh * pl.ow;
        std::int64_t* ip = idx + plane * pl.oh * pl.ow;
        for (std::int64_t oy = 0; oy < pl.oh; ++oy) {
          std::int64_t ih0 = oy * p_.sh - p_.ph;
          const std::int64_t ih1 = std::min(ih0 + (p_.kh - 1) * p_.dh + 1, pl.h);
          while (ih0 < 0) ih0 += p_.dh;
          for (std::int64_t ox = 0; ox < pl.ow; ++ox) {
            std::int64_t iw0 = ox * p_.sw - p_.pw;
            const std::int64_t iw1 = std::min(iw0 + (p_.kw - 1) * p_.dw + 1, pl.w);
            while (iw0 < 0) iw0 += p_.dw;
            // Padding is -inf: only real elements compete; NaN wins, as in PyTorch.
            std::int64_t best_i = ih0 * pl.w + iw0;
            T best = -std::numeric_limits<T>::infinity();
            for (std::int64_t ih = ih0; ih < ih1; ih += p_.dh)
              for (std::int64_t iw = iw0; iw < iw1; iw += p_.dw) {
                const std::int64_t i = ih * pl.w + iw;
                const T v = xp[i];
                if (v > best || std::isnan(v)) best = v, best_i = i;
              }
            yp[oy * pl.ow + ox] = best;
            ip[oy * pl.ow + ox] = best_i;
          }
        }
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {max_pool2d_backward(c.grad(0), c.output(1), c.input_meta(0).shape)};
  }
  double flops(std::span<const TensorMeta>, std::span<const TensorMeta> out) const override {
    return static_cast<double>(out[0].numel() * p_.kh * p_.kw);
  }

 private:
  Pool2dParams p_;
};

// Routes each output gradient to the input element that won its window (summing where windows
// overlap).  Linear in grad; its derivative gathers the incoming gradient at the same indices.
class MaxPool2dBackwardOp final : public Op {
 public:
  MaxPool2dBackwardOp(std::int64_t h, std::int64_t w) : h_(h), w_(w) {}
  std::string_view name() const override { return "max_pool2d_backward"; }
  SaveSpec saves() const override { return {0b10, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 2 && in[0].dim() == 4 && in[1].shape == in[0].shape &&
                    in[1].dtype == DType::Int64 && is_floating(in[0].dtype),
                "max_pool2d_backward: expected a floating 4-D grad and int64 indices of the same "
                "shape, got {} ({}) and {} ({})",
                in[0].shape, in[0].dtype, in[1].shape, in[1].dtype);
    return {TensorMeta::contiguous({in[0].shape[0], in[0].shape[1], h_, w_}, in[0].dtype,
                                   in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Planes pl(out[0].meta->shape, in[0].meta->shape);
    const std::int64_t* idx = in[1].data<std::int64_t>();
    const std::int64_t per_plane = pl.oh * pl.ow, plane_size = pl.h * pl.w;
    // Checked before the parallel loop: an exception must not cross an OpenMP region.
    for (std::int64_t i = 0; i < pl.count * per_plane; ++i)
      REMAT_CHECK(idx[i] >= 0 && idx[i] < plane_size,
                  "max_pool2d_backward: index {} out of range for an input plane of {}x{}", idx[i],
                  pl.h, pl.w);
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T* g = in[0].data<T>();
      T* gx = out[0].data<T>();
      for_planes(pl.count, per_plane + plane_size, [&](std::int64_t plane) {
        T* gp = gx + plane * plane_size;
        std::fill_n(gp, plane_size, T(0));
        const T* go = g + plane * per_plane;
        const std::int64_t* ip = idx + plane * per_plane;
        for (std::int64_t i = 0; i < per_plane; ++i) gp[ip[i]] += go[i];
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& gg = c.grad(0);
    const Tensor& idx = c.input(1);
    const Shape& s = c.input_meta(0).shape;
    Tensor picked =
        gather(reshape(gg, {s[0], s[1], h_ * w_}), 2, reshape(idx, {s[0], s[1], s[2] * s[3]}));
    return {reshape(picked, s), Tensor()};
  }

 private:
  std::int64_t h_, w_;
};

Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape) {
  return call1(std::make_shared<MaxPool2dBackwardOp>(input_shape[2], input_shape[3]),
               {contiguous(grad), contiguous(indices)});
}

// ---------------------------------------------------------------- average pooling
// PyTorch's window rule: the divisor counts padding (when asked) but not the part of a ceil_mode
// window hanging past the padding.
struct AvgWindow {
  std::int64_t h0, h1, w0, w1, divisor;
  bool empty() const { return h0 >= h1 || w0 >= w1; }
};

AvgWindow avg_window(const Pool2dParams& p, std::int64_t oy, std::int64_t ox, std::int64_t h,
                     std::int64_t w) {
  std::int64_t h0 = oy * p.sh - p.ph, w0 = ox * p.sw - p.pw;
  std::int64_t h1 = std::min(h0 + p.kh, h + p.ph), w1 = std::min(w0 + p.kw, w + p.pw);
  const std::int64_t pool_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<std::int64_t>(h0, 0), w0 = std::max<std::int64_t>(w0, 0);
  h1 = std::min(h1, h), w1 = std::min(w1, w);
  const std::int64_t divisor = p.divisor             ? p.divisor
                               : p.count_include_pad ? pool_size
                                                     : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, divisor};
}

Tensor avg_pool_call(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool_backward_call(const Tensor& g, const Pool2dParams& p, const Shape& input_shape);

class AvgPool2dOp final : public Op {
 public:
  explicit AvgPool2dOp(Pool2dParams p) : p_(p) {}
  std::string_view name() const override { return "avg_pool2d"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    return {TensorMeta::contiguous(pooled_shape("avg_pool2d", in[0], p_, false), in[0].dtype,
                                   in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Planes pl(in[0].meta->shape, out[0].meta->shape);
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      for_planes(pl.count, pl.oh * pl.ow * p_.kh * p_.kw, [&](std::int64_t plane) {
        const T* xp = x + plane * pl.h * pl.w;
        T* yp = y + plane * pl.oh * pl.ow;
        for (std::int64_t oy = 0; oy < pl.oh; ++oy)
          for (std::int64_t ox = 0; ox < pl.ow; ++ox) {
            const AvgWindow win = avg_window(p_, oy, ox, pl.h, pl.w);
            double acc = 0;
            if (!win.empty())
              for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
                for (std::int64_t iw = win.w0; iw < win.w1; ++iw) acc += xp[ih * pl.w + iw];
            yp[oy * pl.ow + ox] =
                win.empty() ? T(0) : static_cast<T>(acc / static_cast<double>(win.divisor));
          }
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {avg_pool_backward_call(c.grad(0), p_, c.input_meta(0).shape)};
  }
  double flops(std::span<const TensorMeta>, std::span<const TensorMeta> out) const override {
    return static_cast<double>(out[0].numel() * p_.kh * p_.kw);
  }

 private:
  Pool2dParams p_;
};

// The adjoint of avg_pool2d (it is linear), so its own derivative is avg_pool2d again.
class AvgPool2dBackwardOp final : public Op {
 public:
  AvgPool2dBackwardOp(Pool2dParams p, std::int64_t h, std::int64_t w) : p_(p), h_(h), w_(w) {}
  std::string_view name() const override { return "avg_pool2d_backward"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in[0].dim() == 4, "avg_pool2d_backward: expected a 4-D grad, got shape {}",
                in[0].shape);
    const TensorMeta x =
        TensorMeta::contiguous({in[0].shape[0], in[0].shape[1], h_, w_}, in[0].dtype, in[0].device);
    const Shape expected = pooled_shape("avg_pool2d_backward", x, p_, false);
    REMAT_CHECK(expected == in[0].shape,
                "avg_pool2d_backward: grad of shape {} does not match input shape {} (expected {})",
                in[0].shape, x.shape, expected);
    return {x};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Planes pl(out[0].meta->shape, in[0].meta->shape);
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T* g = in[0].data<T>();
      T* gx = out[0].data<T>();
      for_planes(pl.count, pl.oh * pl.ow * p_.kh * p_.kw, [&](std::int64_t plane) {
        T* gp = gx + plane * pl.h * pl.w;
        const T* go = g + plane * pl.oh * pl.ow;
        std::fill_n(gp, pl.h * pl.w, T(0));
        for (std::int64_t oy = 0; oy < pl.oh; ++oy)
          for (std::int64_t ox = 0; ox < pl.ow; ++ox) {
            const AvgWindow win = avg_window(p_, oy, ox, pl.h, pl.w);
            if (win.empty()) continue;
            const T share = static_cast<T>(static_cast<double>(go[oy * pl.ow + ox]) /
                                           static_cast<double>(win.divisor));
            for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
              for (std::int64_t iw = win.w0; iw < win.w1; ++iw) gp[ih * pl.w + iw] += share;
          }
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {avg_pool_call(c.grad(0), p_)};
  }

 private:
  Pool2dParams p_;
  std::int64_t h_, w_;
};

Tensor avg_pool_call(const Tensor& x, const Pool2dParams& p) {
  return call1(std::make_shared<AvgPool2dOp>(p), {contiguous(x)});
}

Tensor avg_pool_backward_call(const Tensor& g, const Pool2dParams& p, const Shape& input_shape) {
  return call1(std::make_shared<AvgPool2dBackwardOp>(p, input_shape[2], input_shape[3]),
               {contiguous(g)});
}

// ---------------------------------------------------------------- adaptive average pooling
std::int64_t window_start(std::int64_t o, std::int64_t out, std::int64_t in) {
  return (o * in) / out;
}
std::int64_t window_end(std::int64_t o, std::int64_t out, std::int64_t in) {
  return ((o + 1) * in + out - 1) / out;
}

Tensor adaptive_call(const Tensor& x, std::int64_t oh, std::int64_t ow);
Tensor adaptive_backward_call(const Tensor& g, const Shape& input_shape);

class AdaptiveAvgPool2dOp final : public Op {
 public:
  AdaptiveAvgPool2dOp(std::int64_t oh, std::int64_t ow) : oh_(oh), ow_(ow) {}
  std::string_view name() const override { return "adaptive_avg_pool2d"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& x = in[0];
    REMAT_CHECK(is_floating(x.dtype) && x.dim() == 4,
                "adaptive_avg_pool2d: expected a float32/float64 3-D [C, H, W] or 4-D [N, C, H, W] "
                "input, got {} of shape {}",
                x.dtype, x.shape);
    REMAT_CHECK(
        oh_ >= 1 && ow_ >= 1 && x.shape[2] >= 1 && x.shape[3] >= 1,
        "adaptive_avg_pool2d: output size ({}, {}) and input size of shape {} must be positive",
        oh_, ow_, x.shape);
    return {TensorMeta::contiguous({x.shape[0], x.shape[1], oh_, ow_}, x.dtype, x.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Planes pl(in[0].meta->shape, out[0].meta->shape);
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      for_planes(pl.count, pl.h * pl.w, [&](std::int64_t plane) {
        const T* xp = x + plane * pl.h * pl.w;
        T* yp = y + plane * pl.oh * pl.ow;
        for (std::int64_t oy = 0; oy < pl.oh; ++oy) {
          const std::int64_t h0 = window_start(oy, pl.oh, pl.h), h1 = window_end(oy, pl.oh, pl.h);
          for (std::int64_t ox = 0; ox < pl.ow; ++ox) {
            const std::int64_t w0 = window_start(ox, pl.ow, pl.w), w1 = window_end(ox, pl.ow, pl.w);
            double acc = 0;
            for (std::int64_t ih = h0; ih < h1; ++ih)
              for (std::int64_t iw = w0; iw < w1; ++iw) acc += xp[ih * pl.w + iw];
            yp[oy * pl.ow + ox] = static_cast<T>(acc / static_cast<double>((h1 - h0) * (w1 - w0)));
          }
        }
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {adaptive_backward_call(c.grad(0), c.input_meta(0).shape)};
  }

 private:
  std::int64_t oh_, ow_;
};

// The adjoint of adaptive_avg_pool2d; its derivative is adaptive_avg_pool2d again.
class AdaptiveAvgPool2dBackwardOp final : public Op {
 public:
  AdaptiveAvgPool2dBackwardOp(std::int64_t h, std::int64_t w) : h_(h), w_(w) {}
  std::string_view name() const override { return "adaptive_avg_pool2d_backward"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in[0].dim() == 4 && is_floating(in[0].dtype),
                "adaptive_avg_pool2d_backward: expected a floating 4-D grad, got shape {}",
                in[0].shape);
    return {TensorMeta::contiguous({in[0].shape[0], in[0].shape[1], h_, w_}, in[0].dtype,
                                   in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Planes pl(out[0].meta->shape, in[0].meta->shape);
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T* g = in[0].data<T>();
      T* gx = out[0].data<T>();
      for_planes(pl.count, pl.h * pl.w, [&](std::int64_t plane) {
        T* gp = gx + plane * pl.h * pl.w;
        const T* go = g + plane * pl.oh * pl.ow;
        std::fill_n(gp, pl.h * pl.w, T(0));
        for (std::int64_t oy = 0; oy < pl.oh; ++oy) {
          const std::int64_t h0 = window_start(oy, pl.oh, pl.h), h1 = window_end(oy, pl.oh, pl.h);
          for (std::int64_t ox = 0; ox < pl.ow; ++ox) {
            const std::int64_t w0 = window_start(ox, pl.ow, pl.w), w1 = window_end(ox, pl.ow, pl.w);
            const T share = static_cast<T>(static_cast<double>(go[oy * pl.ow + ox]) /
                                           static_cast<double>((h1 - h0) * (w1 - w0)));
            for (std::int64_t ih = h0; ih < h1; ++ih)
              for (std::int64_t iw = w0; iw < w1; ++iw) gp[ih * pl.w + iw] += share;
          }
        }
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Shape& s = c.input_meta(0).shape;
    return {adaptive_call(c.grad(0), s[2], s[3])};
  }

 private:
  std::int64_t h_, w_;
};

Tensor adaptive_call(const Tensor& x, std::int64_t oh, std::int64_t ow) {
  return call1(std::make_shared<AdaptiveAvgPool2dOp>(oh, ow), {contiguous(x)});
}

Tensor adaptive_backward_call(const Tensor& g, const Shape& input_shape) {
  return call1(std::make_shared<AdaptiveAvgPool2dBackwardOp>(input_shape[2], input_shape[3]),
               {contiguous(g)});
}

// Unbatched [C, H, W] inputs run as a batch of one.
template <class F>
Tensor batched(std::string_view op, const Tensor& x, F&& f) {
  REMAT_CHECK(x.defined(), "{}: the input is an undefined tensor", op);
  REMAT_CHECK(x.dim() == 3 || x.dim() == 4,
              "{}: expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got shape {}", op,
              x.shape());
  if (x.dim() == 3) return squeeze(f(unsqueeze(x, 0)), 0);
  return f(x);
}

Size2 stride_or_kernel(Size2 stride, Size2 kernel) {
  return stride == Size2(0) ? kernel : stride;
}

Pool2dParams max_params(const MaxPool2dOptions& o) {
  const Size2 s = stride_or_kernel(o.stride, o.kernel_size);
  return {o.kernel_size.h, o.kernel_size.w, s.h,  s.w, o.padding.h, o.padding.w, o.dilation.h,
          o.dilation.w,    o.ceil_mode,     true, 0};
}

Pool2dParams avg_params(const AvgPool2dOptions& o) {
  const Size2 s = stride_or_kernel(o.stride, o.kernel_size);
  REMAT_CHECK(!o.divisor_override || *o.divisor_override > 0,
              "avg_pool2d: divisor_override must be positive, got {}",
              o.divisor_override.value_or(0));
  return {o.kernel_size.h,
          o.kernel_size.w,
          s.h,
          s.w,
          o.padding.h,
          o.padding.w,
          1,
          1,
          o.ceil_mode,
          o.count_include_pad,
          o.divisor_override.value_or(0)};
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const MaxPool2dOptions& opts) {
  const Pool2dParams p = max_params(opts);
  Tensor indices;
  Tensor values = batched("max_pool2d", x, [&](const Tensor& x4) {
    auto outs = call(std::make_shared<MaxPool2dOp>(p), {contiguous(x4)});
    indices = x.dim() == 3 ? squeeze(outs[1], 0) : outs[1];
    return outs[0];
  });
  return {values, indices};
}

Tensor max_pool2d(const Tensor& x, const MaxPool2dOptions& opts) {
  return max_pool2d_with_indices(x, opts).first;
}

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding, Size2 dilation,
                  bool ceil_mode) {
  return max_pool2d(x, MaxPool2dOptions{kernel_size, stride, padding, dilation, ceil_mode});
}

Tensor avg_pool2d(const Tensor& x, const AvgPool2dOptions& opts) {
  const Pool2dParams p = avg_params(opts);
  return batched("avg_pool2d", x, [&](const Tensor& x4) { return avg_pool_call(x4, p); });
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding,
                  bool count_include_pad) {
  return avg_pool2d(x, AvgPool2dOptions{.kernel_size = kernel_size,
                                        .stride = stride,
                                        .padding = padding,
                                        .count_include_pad = count_include_pad});
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size) {
  return batched("adaptive_avg_pool2d", x,
                 [&](const Tensor& x4) { return adaptive_call(x4, output_size.h, output_size.w); });
}

}  // namespace remat
