#include "ops/rnn.h"

#include <Eigen/Core>
#include <algorithm>

#include "autograd/grad_mode.h"
#include "ops/cpu/loops.h"
#include "ops/elementwise.h"
#include "ops/join.h"
#include "ops/op.h"
#include "ops/view.h"

namespace remat {
namespace {

template <class T>
using Chunk = Eigen::Array<T, 8, 1>;

// Every element goes through the same chunk-of-8 code (the tail padded), whatever the buffers'
// alignment, so a replay into another buffer gives the same bits.
template <class T, class F>
void for_chunks(std::int64_t n, F&& f) {
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) f(j, 8);
  if (j < n) f(j, n - j);
}

// Inlined: called per chunk of 8, a call each would cost as much as the arithmetic.
template <class T>
[[gnu::always_inline]] inline Chunk<T> load(const T* p, std::int64_t w) {
  if (w == 8) return Eigen::Map<const Chunk<T>>(p);
  Chunk<T> r = Chunk<T>::Zero();
  for (std::int64_t l = 0; l < w; ++l) r[l] = p[l];
  return r;
}

template <class T>
[[gnu::always_inline]] inline void store(T* p, const Chunk<T>& v, std::int64_t w) {
  if (w == 8) {
    Eigen::Map<Chunk<T>> m(p);
    m = v;
    return;
  }
  for (std::int64_t l = 0; l < w; ++l) p[l] = v[l];
}

template <class T>
[[gnu::always_inline]] inline Chunk<T> sigmoid_chunk(const Chunk<T>& x) {
  return T(1) / (T(1) + (-x).exp());
}

// The four gate activations of row chunk [j, j + w) of one batch row.
template <class T>
struct Gates {
  Chunk<T> i, f, g, o;
  [[gnu::always_inline]] Gates(const T* gx, const T* gh, std::int64_t hidden, std::int64_t j,
                               std::int64_t w) {
    auto pre = [&](std::int64_t k) {
      return Chunk<T>(load(gx + k * hidden + j, w) + load(gh + k * hidden + j, w));
    };
    i = sigmoid_chunk<T>(pre(0));
    f = sigmoid_chunk<T>(pre(1));
    g = pre(2).tanh();
    o = sigmoid_chunk<T>(pre(3));
  }
};

// Rows of [batch, ...] across threads when a step is large enough to pay for it.
template <class F>
void over_rows(std::int64_t rows, std::int64_t per_row, F&& f) {
  const std::int64_t grain = std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(per_row, 1));
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
          for_chunks<T>(hidden, [&](std::int64_t j, std::int64_t w) {
            const Gates<T> a(gx + r4, gh + r4, hidden, j, w);
            const Chunk<T> tc = load(c + r + j, w).tanh();
            const Chunk<T> gh_ = load(dh + r + j, w);
            const Chunk<T> dct = load(dc + r + j, w) + gh_ * a.o * (T(1) - tc * tc);
            store(dg + r4 + j, Chunk<T>(dct * a.g * a.i * (T(1) - a.i)), w);
            store(dg + r4 + hidden + j, Chunk<T>(dct * load(cp + r + j, w) * a.f * (T(1) - a.f)),
                  w);
            store(dg + r4 + 2 * hidden + j, Chunk<T>(dct * a.i * (T(1) - a.g * a.g)), w);
            store(dg + r4 + 3 * hidden + j, Chunk<T>(gh_ * tc * a.o * (T(1) - a.o)), w);
            store(dcp + r + j, Chunk<T>(dct * a.f), w);
          });
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
          for_chunks<T>(hidden, [&](std::int64_t j, std::int64_t w) {
            const Gates<T> a(gx + r4, gh + r4, hidden, j, w);
            const Chunk<T> cn = a.f * load(cp + r + j, w) + a.i * a.g;
            store(c + r + j, cn, w);
            store(h + r + j, Chunk<T>(a.o * cn.tanh()), w);
          });
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
