#include "ops/rnn.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/vec_math.h"
#include "ops/elementwise.h"
#include "ops/join.h"
#include "ops/op.h"
#include "ops/view.h"

namespace remat {
namespace {

// The four gate activations of one element j of one batch row.  Straight-line code (vec_math)
// under `omp simd`: the loops over j vectorise, and every element runs the same instructions
// whatever the buffers' alignment, so a replay into another buffer gives the same bits.
template <class T>
struct Gates {
  T i, f, g, o;
  [[gnu::always_inline]] Gates(const T* gx, const T* gh, std::int64_t hidden, std::int64_t j) {
    i = detail::vsigmoid(static_cast<T>(gx[j] + gh[j]));
    f = detail::vsigmoid(static_cast<T>(gx[hidden + j] + gh[hidden + j]));
    g = detail::vtanh(static_cast<T>(gx[2 * hidden + j] + gh[2 * hidden + j]));
    o = detail::vsigmoid(static_cast<T>(gx[3 * hidden + j] + gh[3 * hidden + j]));
  }
};

// Rows of [batch, ...] across threads when a step is large enough to pay for it.
template <class F>
void over_rows(std::int64_t rows, std::int64_t per_row, F&& f) {
  const std::int64_t grain = grain_for(per_row);
  if (rows <= grain) {
    f(0, rows);
    return;
  }
  parallel_for(0, rows, grain, f);
}

void check_cell_inputs(std::string_view op, std::span<const TensorMeta> in) {
  const TensorMeta &gx = in[0], &gh = in[1], &c = in[2];
  REMAT_CHECK(is_floating(gx.dtype) && gx.dtype == gh.dtype && gx.dtype == c.dtype,
              "{}: expected floating-point tensors of one dtype, got {}, {} and {}", op, gx.dtype,
              gh.dtype, c.dtype);
  const bool match = c.dim() == 2 && gx.dim() == 2 && gx.shape[0] == c.shape[0] &&
                     gx.shape[1] == 4 * c.shape[1] && gh.shape == gx.shape;
  REMAT_CHECK(match,
              "{}: gates of shapes {} and {} do not match the cell state {} (expected [batch, 4 * "
              "hidden] and [batch, hidden])",
              op, gx.shape, gh.shape, c.shape);
  for (const TensorMeta& m : in)
    REMAT_CHECK(m.is_contiguous(), "{}: internal error, an input of shape {} is not contiguous", op,
                m.shape);
}

// {dgates, dc_prev} from the saved inputs, the cell state c and the incoming gradients.
class LstmCellBackwardOp final : public Op {
 public:
  std::string_view name() const override { return "lstm_cell_backward"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 6, "lstm_cell_backward: expected 6 inputs, got {}", in.size());
    check_cell_inputs(name(), in);
    for (int k = 3; k < 6; ++k)
      REMAT_CHECK(in[k].shape == in[2].shape && in[k].dtype == in[2].dtype && in[k].is_contiguous(),
                  "lstm_cell_backward: input {} of shape {} does not match the cell state {}", k,
                  in[k].shape, in[2].shape);
    return {TensorMeta::contiguous(in[0].shape, in[0].dtype, in[0].device),
            TensorMeta::contiguous(in[2].shape, in[2].dtype, in[2].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const std::int64_t batch = in[2].meta->shape[0], hidden = in[2].meta->shape[1];
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T *gx = in[0].data<T>(), *gh = in[1].data<T>(), *cp = in[2].data<T>();
      const T *c = in[3].data<T>(), *dh = in[4].data<T>(), *dc = in[5].data<T>();
      T *dg = out[0].data<T>(), *dcp = out[1].data<T>();
      over_rows(batch, 4 * hidden, [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b) {
          const std::int64_t r4 = b * 4 * hidden, r = b * hidden;
          const T *gxr = gx + r4, *ghr = gh + r4, *cpr = cp + r, *cr = c + r, *dhr = dh + r,
                  *dcr = dc + r;
          T *dgr = dg + r4, *dcpr = dcp + r;
#pragma omp simd
          for (std::int64_t j = 0; j < hidden; ++j) {
            const Gates<T> a(gxr, ghr, hidden, j);
            const T tc = detail::vtanh(cr[j]);
            const T dht = dhr[j];
            const T dct = dcr[j] + dht * a.o * (T(1) - tc * tc);
            dgr[j] = dct * a.g * a.i * (T(1) - a.i);
            dgr[hidden + j] = dct * cpr[j] * a.f * (T(1) - a.f);
            dgr[2 * hidden + j] = dct * a.i * (T(1) - a.g * a.g);
            dgr[3 * hidden + j] = dht * tc * a.o * (T(1) - a.o);
            dcpr[j] = dct * a.f;
          }
        }
      });
    });
  }
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta>) const override {
    return 60.0 * static_cast<double>(in[2].numel());
  }
};

class LstmCellOp final : public Op {
 public:
  std::string_view name() const override { return "lstm_cell"; }
  SaveSpec saves() const override { return {0b111, 0b10}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 3, "lstm_cell: expected 3 inputs, got {}", in.size());
    check_cell_inputs(name(), in);
    const TensorMeta& c = in[2];
    return {TensorMeta::contiguous(c.shape, c.dtype, c.device),
            TensorMeta::contiguous(c.shape, c.dtype, c.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const std::int64_t batch = in[2].meta->shape[0], hidden = in[2].meta->shape[1];
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T *gx = in[0].data<T>(), *gh = in[1].data<T>(), *cp = in[2].data<T>();
      T *h = out[0].data<T>(), *c = out[1].data<T>();
      over_rows(batch, 4 * hidden, [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b) {
          const std::int64_t r4 = b * 4 * hidden, r = b * hidden;
          const T *gxr = gx + r4, *ghr = gh + r4, *cpr = cp + r;
          T *hr = h + r, *cr = c + r;
#pragma omp simd
          for (std::int64_t j = 0; j < hidden; ++j) {
            const Gates<T> a(gxr, ghr, hidden, j);
            const T cn = a.f * cpr[j] + a.i * a.g;
            cr[j] = cn;
            hr[j] = a.o * detail::vtanh(cn);
          }
        }
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& ctx) const override {
    const Tensor &gx = ctx.input(0), &gh = ctx.input(1), &cp = ctx.input(2), &c = ctx.output(1);
    const Tensor &dh = ctx.grad(0), &dc = ctx.grad(1);
    Tensor dgates, dcp;
    if (!GradMode::is_enabled()) {
      static const auto op = std::make_shared<LstmCellBackwardOp>();
      auto r = call(op, {gx, gh, cp, c, contiguous(dh), contiguous(dc)});
      dgates = r[0], dcp = r[1];
    } else {
      // The same formulas with public ops: differentiable again.
      const auto pre = chunk(add(gx, gh), 4, 1);
      const Tensor i = sigmoid(pre[0]), f = sigmoid(pre[1]), g = tanh(pre[2]), o = sigmoid(pre[3]);
      const Tensor tc = tanh(c);
      const Tensor dct = add(dc, mul(mul(dh, o), rsub(1.0, mul(tc, tc))));
      auto dsig = [](const Tensor& s) { return mul(s, rsub(1.0, s)); };
      dgates = cat({mul(mul(dct, g), dsig(i)), mul(mul(dct, cp), dsig(f)),
                    mul(mul(dct, i), rsub(1.0, mul(g, g))), mul(mul(dh, tc), dsig(o))},
                   1);
      dcp = mul(dct, f);
    }
    return {ctx.needs(0) ? dgates : Tensor(), ctx.needs(1) ? dgates : Tensor(),
            ctx.needs(2) ? dcp : Tensor()};
  }
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta>) const override {
    return 40.0 * static_cast<double>(in[2].numel());
  }
};

}  // namespace

std::pair<Tensor, Tensor> lstm_cell(const Tensor& gates_x, const Tensor& gates_h,
                                    const Tensor& c_prev) {
  static const auto op = std::make_shared<LstmCellOp>();
  REMAT_CHECK(gates_x.defined() && gates_h.defined() && c_prev.defined(),
              "lstm_cell: an input is an undefined tensor");
  auto r = call(op, {contiguous(gates_x), contiguous(gates_h), contiguous(c_prev)});
  return {r[0], r[1]};
}

}  // namespace remat
