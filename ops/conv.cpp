#include "ops/conv.h"

#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/cpu/onednn.h"
#include "ops/op.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace remat {
namespace {

using detail::ConvGeometry;

void check_options(std::string_view op, const Conv2dOptions& o) {
  const bool explicit_padding = o.padding.mode == Padding2::Mode::Explicit;
  REMAT_CHECK(o.stride.h >= 1 && o.stride.w >= 1 && o.dilation.h >= 1 && o.dilation.w >= 1 &&
                  (!explicit_padding || (o.padding.h >= 0 && o.padding.w >= 0)) && o.groups >= 1,
              "{}: invalid options stride {}, padding {}, dilation {}, groups {} (stride, dilation "
              "and groups must be positive, padding non-negative)",
              op, o.stride, o.padding, o.dilation, o.groups);
  REMAT_CHECK(o.padding.mode != Padding2::Mode::Same || (o.stride.h == 1 && o.stride.w == 1),
              "{}: padding \"same\" needs stride 1, got stride {}", op, o.stride);
}

// Zeros before (top or left) and after (bottom or right) one spatial dim of kernel size k.
struct PadPair {
  std::int64_t begin, end;
};
PadPair resolve_padding(Padding2::Mode mode, std::int64_t explicit_pad, std::int64_t k,
                        std::int64_t d) {
  switch (mode) {
    case Padding2::Mode::Explicit:
      return {explicit_pad, explicit_pad};
    case Padding2::Mode::Valid:
      return {0, 0};
    case Padding2::Mode::Same:
      break;
  }
  const std::int64_t total = d * (k - 1);
  return {total / 2, total - total / 2};
}

std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t s, PadPair p, std::int64_t d) {
  return (in + p.begin + p.end - d * (k - 1) - 1) / s + 1;
}

// Validates input and weight shapes (naming `op` and both shapes) and returns the geometry.
ConvGeometry geometry(std::string_view op, const Shape& x, const Shape& w, const Conv2dOptions& o) {
  check_options(op, o);
  REMAT_CHECK(x.size() == 4 && w.size() == 4,
              "{}: expected a 4-D input [N, C, H, W] and a 4-D weight [O, C/groups, KH, KW], got "
              "shapes {} and {}",
              op, x, w);
  REMAT_CHECK(
      w[0] % o.groups == 0 && x[1] == w[1] * o.groups,
      "{}: input of shape {} does not match weight of shape {} with groups {} (input channels "
      "must be weight.shape[1] * groups and output channels divisible by groups)",
      op, x, w, o.groups);
  const PadPair ph = resolve_padding(o.padding.mode, o.padding.h, w[2], o.dilation.h);
  const PadPair pw = resolve_padding(o.padding.mode, o.padding.w, w[3], o.dilation.w);
  const std::int64_t eh = o.dilation.h * (w[2] - 1) + 1, ew = o.dilation.w * (w[3] - 1) + 1;
  REMAT_CHECK(
      w[2] >= 1 && w[3] >= 1 && x[2] + ph.begin + ph.end >= eh && x[3] + pw.begin + pw.end >= ew,
      "{}: kernel of shape {} (dilation {}) is larger than the padded input of shape {} "
      "(padding {})",
      op, w, o.dilation, x, o.padding);
  ConvGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.oh = out_size(g.h, g.kh, o.stride.h, ph, o.dilation.h);
  g.ow = out_size(g.w, g.kw, o.stride.w, pw, o.dilation.w);
  g.stride_h = o.stride.h, g.stride_w = o.stride.w, g.pad_h = ph.begin, g.pad_w = pw.begin;
  g.extra_h = ph.end - ph.begin, g.extra_w = pw.end - pw.begin;
  g.dilation_h = o.dilation.h, g.dilation_w = o.dilation.w, g.groups = o.groups;
  return g;
}

void check_dtypes(std::string_view op, std::string_view a_name, const TensorMeta& a,
                  std::string_view b_name, const TensorMeta& b) {
  REMAT_CHECK(a.dtype == b.dtype, "{}: {} is {} (shape {}) but {} is {} (shape {})", op, a_name,
              a.dtype, a.shape, b_name, b.dtype, b.shape);
  REMAT_CHECK(is_floating(a.dtype),
              "{}: expected float32 or float64 tensors, got {} ({} of shape {})", op, a.dtype,
              a_name, a.shape);
}

double conv_flops(const ConvGeometry& g) {
  return 2.0 * static_cast<double>(g.n * g.o * g.oh * g.ow) *
         static_cast<double>(g.c / g.groups * g.kh * g.kw);
}

// ---------------------------------------------------------------- float64 kernels
// float64 exists for gradient checks, so it takes the simple route: im2col + Eigen GEMM per
// sample and group.  col is [C/groups * KH * KW, OH * OW].
using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat>;
using ConstMatMap = Eigen::Map<const RowMat>;

template <class F>
void for_each_tap(const ConvGeometry& g, F&& f) {
  const std::int64_t cg = g.c / g.groups;
  for (std::int64_t c = 0; c < cg; ++c)
    for (std::int64_t ki = 0; ki < g.kh; ++ki)
      for (std::int64_t kj = 0; kj < g.kw; ++kj) {
        const std::int64_t row = (c * g.kh + ki) * g.kw + kj;
        for (std::int64_t oy = 0; oy < g.oh; ++oy) {
          const std::int64_t iy = oy * g.stride_h - g.pad_h + ki * g.dilation_h;
          for (std::int64_t ox = 0; ox < g.ow; ++ox) {
            const std::int64_t ix = ox * g.stride_w - g.pad_w + kj * g.dilation_w;
            const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
            f(row * g.oh * g.ow + oy * g.ow + ox, inside ? (c * g.h + iy) * g.w + ix : -1);
          }
        }
      }
}

void im2col(const ConvGeometry& g, const double* x, double* col) {
  for_each_tap(g, [&](std::int64_t ci, std::int64_t xi) { col[ci] = xi >= 0 ? x[xi] : 0.0; });
}

void col2im_add(const ConvGeometry& g, const double* col, double* x) {
  for_each_tap(g, [&](std::int64_t ci, std::int64_t xi) {
    if (xi >= 0) x[xi] += col[ci];
  });
}

struct GroupDims {
  std::int64_t cg, og, taps, plane_in, plane_out;
  explicit GroupDims(const ConvGeometry& g)
      : cg(g.c / g.groups),
        og(g.o / g.groups),
        taps(cg * g.kh * g.kw),
        plane_in(g.h * g.w),
        plane_out(g.oh * g.ow) {}
};

void conv_forward_f64(const ConvGeometry& g, const double* x, const double* w, const double* bias,
                      double* y) {
  const GroupDims d(g);
  std::vector<double> col(d.taps * d.plane_out);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t gi = 0; gi < g.groups; ++gi) {
      im2col(g, x + (n * g.c + gi * d.cg) * d.plane_in, col.data());
      MatMap out(y + (n * g.o + gi * d.og) * d.plane_out, d.og, d.plane_out);
      out.noalias() = ConstMatMap(w + gi * d.og * d.taps, d.og, d.taps) *
                      ConstMatMap(col.data(), d.taps, d.plane_out);
      if (bias)
        for (std::int64_t o = 0; o < d.og; ++o) out.row(o).array() += bias[gi * d.og + o];
    }
}

void conv_backward_data_f64(const ConvGeometry& g, const double* gy, const double* w, double* gx) {
  const GroupDims d(g);
  std::vector<double> col(d.taps * d.plane_out);
  std::fill_n(gx, g.n * g.c * d.plane_in, 0.0);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t gi = 0; gi < g.groups; ++gi) {
      MatMap(col.data(), d.taps, d.plane_out).noalias() =
          ConstMatMap(w + gi * d.og * d.taps, d.og, d.taps).transpose() *
          ConstMatMap(gy + (n * g.o + gi * d.og) * d.plane_out, d.og, d.plane_out);
      col2im_add(g, col.data(), gx + (n * g.c + gi * d.cg) * d.plane_in);
    }
}

void conv_backward_weights_f64(const ConvGeometry& g, const double* x, const double* gy,
                               double* gw) {
  const GroupDims d(g);
  std::vector<double> col(d.taps * d.plane_out);
  std::fill_n(gw, g.o * d.taps, 0.0);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t gi = 0; gi < g.groups; ++gi) {
      im2col(g, x + (n * g.c + gi * d.cg) * d.plane_in, col.data());
      MatMap(gw + gi * d.og * d.taps, d.og, d.taps).noalias() +=
          ConstMatMap(gy + (n * g.o + gi * d.og) * d.plane_out, d.og, d.plane_out) *
          ConstMatMap(col.data(), d.taps, d.plane_out).transpose();
    }
}

// ---------------------------------------------------------------- ops
// Kernels read dense NCHW / OIHW buffers: the public functions pass contiguous inputs.

class Conv2dOp final : public Op {
 public:
  explicit Conv2dOp(Conv2dOptions o) : opts_(o) {}
  std::string_view name() const override { return "conv2d"; }
  SaveSpec saves() const override { return {0b011, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 2 || in.size() == 3, "conv2d: expected 2 or 3 inputs, got {}",
                in.size());
    check_dtypes("conv2d", "input", in[0], "weight", in[1]);
    const ConvGeometry g = geometry("conv2d", in[0].shape, in[1].shape, opts_);
    if (in.size() == 3)
      REMAT_CHECK(in[2].dtype == in[0].dtype && in[2].shape == Shape{g.o},
                  "conv2d: bias of shape {} ({}) does not match weight of shape {} ({})",
                  in[2].shape, in[2].dtype, in[1].shape, in[1].dtype);
    return {TensorMeta::contiguous({g.n, g.o, g.oh, g.ow}, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const ConvGeometry g = geometry("conv2d", in[0].meta->shape, in[1].meta->shape, opts_);
    const bool has_bias = in.size() == 3;
    if (in[0].meta->dtype == DType::Float32)
      detail::conv2d_forward(g, in[0].data<float>(), in[1].data<float>(),
                             has_bias ? in[2].data<float>() : nullptr, out[0].data<float>());
    else
      conv_forward_f64(g, in[0].data<double>(), in[1].data<double>(),
                       has_bias ? in[2].data<double>() : nullptr, out[0].data<double>());
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    std::vector<Tensor> grads(c.input_metas.size());
    // The weight's gradient first: while it runs, x and g are pinned, and dx does not exist yet
    // (the other order holds all three, which sets the smallest budget of a CNN).
    if (c.needs(1)) grads[1] = conv2d_backward_weight(c.input(0), g, c.input_meta(1).shape, opts_);
    if (c.needs(0)) grads[0] = conv2d_backward_input(g, c.input(1), c.input_meta(0).shape, opts_);
    if (grads.size() == 3 && c.needs(2)) grads[2] = sum(g, {0, 2, 3});
    return grads;
  }
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta>) const override {
    return conv_flops(geometry("conv2d", in[0].shape, in[1].shape, opts_));
  }

 private:
  Conv2dOptions opts_;
};

// grad_input = conv2d_backward_input(grad_output, weight): linear in each argument; its own
// derivatives are conv2d (w.r.t. grad_output) and conv2d_backward_weight (w.r.t. weight).
class Conv2dBackwardInputOp final : public Op {
 public:
  Conv2dBackwardInputOp(Conv2dOptions o, std::int64_t h, std::int64_t w) : opts_(o), h_(h), w_(w) {}
  std::string_view name() const override { return "conv2d_backward_input"; }
  SaveSpec saves() const override { return {0b11, 0}; }
  ConvGeometry geom(const TensorMeta& gy, const TensorMeta& w) const {
    REMAT_CHECK(
        gy.dim() == 4 && w.dim() == 4,
        "conv2d_backward_input: expected a 4-D grad_output and weight, got shapes {} and {}",
        gy.shape, w.shape);
    const ConvGeometry g = geometry(
        "conv2d_backward_input", {gy.shape[0], w.shape[1] * opts_.groups, h_, w_}, w.shape, opts_);
    REMAT_CHECK(gy.shape[1] == g.o && gy.shape[2] == g.oh && gy.shape[3] == g.ow,
                "conv2d_backward_input: grad_output of shape {} does not match weight of shape {} "
                "and input size ({}, {}) (expected [{}, {}, {}, {}])",
                gy.shape, w.shape, h_, w_, g.n, g.o, g.oh, g.ow);
    return g;
  }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 2, "conv2d_backward_input: expected 2 inputs, got {}", in.size());
    check_dtypes("conv2d_backward_input", "grad_output", in[0], "weight", in[1]);
    const ConvGeometry g = geom(in[0], in[1]);
    return {TensorMeta::contiguous({g.n, g.c, g.h, g.w}, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const ConvGeometry g = geom(*in[0].meta, *in[1].meta);
    if (in[0].meta->dtype == DType::Float32)
      detail::conv2d_backward_data(g, in[0].data<float>(), in[1].data<float>(),
                                   out[0].data<float>());
    else
      conv_backward_data_f64(g, in[0].data<double>(), in[1].data<double>(), out[0].data<double>());
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    Tensor ggy, gw;
    if (c.needs(0)) ggy = conv2d(g, c.input(1), Tensor(), opts_);
    if (c.needs(1)) gw = conv2d_backward_weight(g, c.input(0), c.input_meta(1).shape, opts_);
    return {ggy, gw};
  }
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta>) const override {
    return conv_flops(geom(in[0], in[1]));
  }

 private:
  Conv2dOptions opts_;
  std::int64_t h_, w_;
};

// grad_weight = conv2d_backward_weight(x, grad_output): its derivatives are
// conv2d_backward_input (w.r.t. x) and conv2d (w.r.t. grad_output).
class Conv2dBackwardWeightOp final : public Op {
 public:
  Conv2dBackwardWeightOp(Conv2dOptions o, std::int64_t kh, std::int64_t kw)
      : opts_(o), kh_(kh), kw_(kw) {}
  std::string_view name() const override { return "conv2d_backward_weight"; }
  SaveSpec saves() const override { return {0b11, 0}; }
  ConvGeometry geom(const TensorMeta& x, const TensorMeta& gy) const {
    REMAT_CHECK(
        x.dim() == 4 && gy.dim() == 4,
        "conv2d_backward_weight: expected a 4-D input and grad_output, got shapes {} and {}",
        x.shape, gy.shape);
    REMAT_CHECK(x.shape[1] % opts_.groups == 0,
                "conv2d_backward_weight: input of shape {} has channels not divisible by groups {}",
                x.shape, opts_.groups);
    const ConvGeometry g = geometry("conv2d_backward_weight", x.shape,
                                    {gy.shape[1], x.shape[1] / opts_.groups, kh_, kw_}, opts_);
    REMAT_CHECK(gy.shape[0] == g.n && gy.shape[2] == g.oh && gy.shape[3] == g.ow,
                "conv2d_backward_weight: grad_output of shape {} does not match input of shape {} "
                "and kernel ({}, {}) (expected [{}, {}, {}, {}])",
                gy.shape, x.shape, kh_, kw_, g.n, g.o, g.oh, g.ow);
    return g;
  }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 2, "conv2d_backward_weight: expected 2 inputs, got {}", in.size());
    check_dtypes("conv2d_backward_weight", "input", in[0], "grad_output", in[1]);
    const ConvGeometry g = geom(in[0], in[1]);
    return {TensorMeta::contiguous({g.o, g.c / g.groups, g.kh, g.kw}, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const ConvGeometry g = geom(*in[0].meta, *in[1].meta);
    if (in[0].meta->dtype == DType::Float32)
      detail::conv2d_backward_weights(g, in[0].data<float>(), in[1].data<float>(),
                                      out[0].data<float>());
    else
      conv_backward_weights_f64(g, in[0].data<double>(), in[1].data<double>(),
                                out[0].data<double>());
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    Tensor gx, ggy;
    if (c.needs(0)) gx = conv2d_backward_input(c.input(1), g, c.input_meta(0).shape, opts_);
    if (c.needs(1)) ggy = conv2d(c.input(0), g, Tensor(), opts_);
    return {gx, ggy};
  }
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta>) const override {
    return conv_flops(geom(in[0], in[1]));
  }

 private:
  Conv2dOptions opts_;
  std::int64_t kh_, kw_;
};

void check_defined(std::string_view op, const Tensor& a, std::string_view a_name, const Tensor& b,
                   std::string_view b_name) {
  REMAT_CHECK(a.defined() && b.defined(), "{}: {} or {} is an undefined tensor", op, a_name,
              b_name);
}

}  // namespace

Padding2::Padding2(std::string_view name) : Size2(0) {
  REMAT_CHECK(name == "same" || name == "valid",
              "conv2d: padding must be a number, a pair, \"same\" or \"valid\", got \"{}\"", name);
  mode = name == "same" ? Mode::Same : Mode::Valid;
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Conv2dOptions opts) {
  check_defined("conv2d", x, "input", weight, "weight");
  if (x.dim() == 3) return squeeze(conv2d(unsqueeze(x, 0), weight, bias, opts), 0);
  check_dtypes("conv2d", "input", x.meta(), "weight", weight.meta());
  const ConvGeometry g = geometry("conv2d", x.shape(), weight.shape(), opts);
  std::vector<Tensor> inputs{contiguous(x), contiguous(weight)};
  if (bias.defined()) {
    REMAT_CHECK(bias.dtype() == x.dtype() && bias.shape() == Shape{g.o},
                "conv2d: bias of shape {} ({}) does not match weight of shape {} ({})",
                bias.shape(), bias.dtype(), weight.shape(), weight.dtype());
    inputs.push_back(contiguous(bias));
  }
  return call1(std::make_shared<Conv2dOp>(opts), std::move(inputs));
}

Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight,
                             const Shape& input_shape, Conv2dOptions opts) {
  check_defined("conv2d_backward_input", grad_output, "grad_output", weight, "weight");
  REMAT_CHECK(input_shape.size() == 4, "conv2d_backward_input: expected a 4-D input shape, got {}",
              input_shape);
  REMAT_CHECK(
      weight.dim() == 4 && input_shape[1] == weight.size(1) * opts.groups &&
          grad_output.dim() == 4 && grad_output.size(0) == input_shape[0],
      "conv2d_backward_input: input shape {} does not match weight of shape {}, grad_output "
      "of shape {} and groups {}",
      input_shape, weight.shape(), grad_output.shape(), opts.groups);
  check_options("conv2d_backward_input", opts);
  auto op = std::make_shared<Conv2dBackwardInputOp>(opts, input_shape[2], input_shape[3]);
  return call1(op, {contiguous(grad_output), contiguous(weight)});
}

Tensor conv2d_backward_weight(const Tensor& x, const Tensor& grad_output, const Shape& weight_shape,
                              Conv2dOptions opts) {
  check_defined("conv2d_backward_weight", x, "input", grad_output, "grad_output");
  REMAT_CHECK(weight_shape.size() == 4,
              "conv2d_backward_weight: expected a 4-D weight shape, got {}", weight_shape);
  REMAT_CHECK(
      x.dim() == 4 && grad_output.dim() == 4 && weight_shape[0] == grad_output.size(1) &&
          weight_shape[1] * opts.groups == x.size(1),
      "conv2d_backward_weight: weight shape {} does not match input of shape {}, grad_output "
      "of shape {} and groups {}",
      weight_shape, x.shape(), grad_output.shape(), opts.groups);
  check_options("conv2d_backward_weight", opts);
  auto op = std::make_shared<Conv2dBackwardWeightOp>(opts, weight_shape[2], weight_shape[3]);
  return call1(op, {contiguous(x), contiguous(grad_output)});
}

}  // namespace remat
