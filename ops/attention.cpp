#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/random.h"
#include "core/scratch.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/softmax_row.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/index.h"
#include "ops/linalg.h"
#include "ops/op.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/view.h"

namespace remat {
namespace {

// Bytes of scores per block of query rows: the block and its gradient stay in L2.
constexpr std::int64_t kBlockBytes = 1 << 17;

// One operand [B, H, rows, cols] with a unit inner stride: matrix (b, h) starts at
// b * s0 + h * s1 and its rows are ld apart.
template <class T>
struct Operand {
  T* base;
  std::int64_t s0, s1, ld;
  T* at(std::int64_t b, std::int64_t h) const { return base + b * s0 + h * s1; }
};

template <class T>
Operand<T> operand(const KernelArg& a) {
  const Shape& s = a.meta->strides;
  return {const_cast<T*>(a.data<T>()), s[0], s[1], s[2]};
}

// A [B, rows, H, cols] buffer seen per (b, h): the layout of the outputs and gradients.
template <class T>
Operand<T> heads_inner(const KernelArg& a, std::int64_t rows, std::int64_t heads,
                       std::int64_t cols) {
  return {const_cast<T*>(a.data<T>()), rows * heads * cols, cols, heads * cols};
}

struct Geometry {
  std::int64_t batch, heads, L, S, E, Ev;
  explicit Geometry(std::span<const KernelArg> in)
      : batch(in[0].meta->shape[0]),
        heads(in[0].meta->shape[1]),
        L(in[0].meta->shape[2]),
        S(in[1].meta->shape[2]),
        E(in[0].meta->shape[3]),
        Ev(in[2].meta->shape[3]) {}
  std::int64_t block_rows(std::size_t element_size) const {
    const auto elements = kBlockBytes / static_cast<std::int64_t>(element_size);
    return std::clamp<std::int64_t>(elements / std::max<std::int64_t>(S, 1), 1,
                                    std::max<std::int64_t>(L, 1));
  }
};

// Per-thread scratch that only grows: a block of scores and one of their gradients.
template <class T>
T* scratch(std::size_t n) {
  thread_local ScratchBuffer buffer;
  return buffer.get<T>(n);
}

// The dropout factor of each element of row `row` (of L) of head (b, h): keep ? 1/(1-p) : 0,
// drawn exactly as DropoutOp draws element i of the contiguous [B, H, L, S] weights.
// Only the first n keys of the row are drawn.
template <class T>
void dropout_factors(RngKey key, double p, std::int64_t bh, std::int64_t row, std::int64_t L,
                     std::int64_t S, std::int64_t n, T* f) {
  const float threshold = static_cast<float>(p);
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const std::int64_t start = (bh * L + row) * S;
  for (std::int64_t j = 0; j < n;) {
    const std::int64_t i = start + j;
    const auto bits = philox4x32(key, static_cast<std::uint64_t>(i / 4));
    for (std::int64_t l = i % 4; l < 4 && j < n; ++l, ++j)
      f[j] = uniform_from_bits(bits[l]) >= threshold ? scale : T(0);
  }
}

// Scores of query rows [r0, r0 + rows) of head (b, h) against keys [0, n) into s (rows x n,
// rows S apart): scale Q K^T + mask, and -inf above the diagonal when causal.
template <class T>
void scores(const Geometry& g, T scale, const Operand<T>& q, const Operand<T>& k,
            const KernelArg* mask, bool causal, std::int64_t b, std::int64_t h, std::int64_t r0,
            std::int64_t rows, std::int64_t n, T* s) {
  detail::gemm<T>(false, true, rows, n, g.E, scale, q.at(b, h) + r0 * q.ld, q.ld, k.at(b, h), k.ld,
                  T(0), s, g.S);
  if (mask) {
    const Shape& ms = mask->meta->strides;
    const T* m0 = mask->data<T>() + b * ms[0] + h * ms[1];
    for (std::int64_t i = 0; i < rows; ++i) {
      const T* mr = m0 + (r0 + i) * ms[2];
      T* sr = s + i * g.S;
      if (ms[3] == 1) {
        for (std::int64_t j = 0; j < n; ++j) sr[j] += mr[j];
      } else {
        for (std::int64_t j = 0; j < n; ++j) sr[j] += mr[j * ms[3]];
      }
    }
  }
  if (causal) {
    for (std::int64_t i = 0; i < rows; ++i)
      std::fill(s + i * g.S + std::min(n, r0 + i + 1), s + i * g.S + n,
                -std::numeric_limits<T>::infinity());
  }
}

// Runs fn(b, h) for every head, across threads when the heads are worth it.
template <class F>
void over_heads(const Geometry& g, F&& fn) {
  const std::int64_t work = g.L * g.S * (g.E + g.Ev);
  parallel_for(0, g.batch * g.heads, grain_for(work), [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) fn(t / g.heads, t % g.heads);
  });
}

struct AttentionAttrs {
  double scale = 1, dropout = 0;
  RngKey key;
  bool has_mask = false;
  bool causal = false;  // query i sees keys 0..i only: later keys are never computed
};

// Causal blocks are short, so each computes only the keys up to its last row: with blocks of
// 32 rows a 128 x 128 head costs 5/8 of the full product.
constexpr std::int64_t kCausalBlockRows = 32;

std::int64_t block_rows(const Geometry& g, const AttentionAttrs& a, std::size_t element_size) {
  const std::int64_t rb = g.block_rows(element_size);
  return a.causal ? std::min(rb, kCausalBlockRows) : rb;
}

// Keys that rows [r0, r0 + rows) can see.
std::int64_t keys_of(const Geometry& g, const AttentionAttrs& a, std::int64_t r0,
                     std::int64_t rows) {
  return a.causal ? std::min(g.S, r0 + rows) : g.S;
}

// Inputs {q, k, v, [mask]} as [B, H, L|S, E|Ev]; outputs {out [B, L, H, Ev], stats [B, H, L, 2]
// (the row maximum and 1 / sum of each softmax row)}.
class AttentionOp final : public Op {
 public:
  explicit AttentionOp(AttentionAttrs a) : a_(a) {}
  std::string_view name() const override { return "attention"; }
  SaveSpec saves() const override { return {a_.has_mask ? 0b1111u : 0b111u, 0b10}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == (a_.has_mask ? 4u : 3u), "attention: expected {} inputs, got {}",
                a_.has_mask ? 4 : 3, in.size());
    const TensorMeta &q = in[0], &k = in[1], &v = in[2];
    for (const TensorMeta& m : in) {
      REMAT_CHECK(m.dim() == 4 && m.dtype == q.dtype && is_floating(m.dtype),
                  "attention: internal error, expected 4-D floating inputs of one dtype, got {} "
                  "({})",
                  m.shape, m.dtype);
    }
    for (int i = 0; i < 3; ++i)
      REMAT_CHECK(in[i].strides[3] == 1 || in[i].shape[3] <= 1,
                  "attention: internal error, input {} of shape {} has inner stride {}", i,
                  in[i].shape, in[i].strides[3]);
    const std::int64_t B = q.shape[0], H = q.shape[1], L = q.shape[2];
    REMAT_CHECK(k.shape[0] == B && k.shape[1] == H && v.shape[0] == B && v.shape[1] == H &&
                    k.shape[3] == q.shape[3] && v.shape[2] == k.shape[2],
                "attention: queries {}, keys {} and values {} do not match", q.shape, k.shape,
                v.shape);
    if (a_.has_mask)
      REMAT_CHECK(in[3].shape == Shape({B, H, L, k.shape[2]}),
                  "attention: internal error, mask of shape {}", in[3].shape);
    return {TensorMeta::contiguous({B, L, H, v.shape[3]}, q.dtype, q.device),
            TensorMeta::contiguous({B, H, L, 2}, q.dtype, q.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Geometry g(in);
    if (g.batch * g.heads * g.L == 0) return;
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const Operand<T> q = operand<T>(in[0]), k = operand<T>(in[1]), v = operand<T>(in[2]);
      const Operand<T> o = heads_inner<T>(out[0], g.L, g.heads, g.Ev);
      T* stats = out[1].data<T>();
      const KernelArg* mask = a_.has_mask ? &in[3] : nullptr;
      const std::int64_t rb = block_rows(g, a_, sizeof(T));
      over_heads(g, [&](std::int64_t b, std::int64_t h) {
        T* s = scratch<T>(static_cast<std::size_t>(rb * std::max<std::int64_t>(g.S, 1) * 2));
        T* f = s + rb * g.S;
        T* st = stats + (b * g.heads + h) * g.L * 2;
        for (std::int64_t r0 = 0; r0 < g.L; r0 += rb) {
          const std::int64_t rows = std::min(rb, g.L - r0);
          T* ob = o.at(b, h) + r0 * o.ld;
          if (g.S == 0) {  // no keys: an empty weighted sum
            for (std::int64_t i = 0; i < rows; ++i) std::fill_n(ob + i * o.ld, g.Ev, T(0));
            continue;
          }
          const std::int64_t n = keys_of(g, a_, r0, rows);
          scores(g, static_cast<T>(a_.scale), q, k, mask, a_.causal, b, h, r0, rows, n, s);
          for (std::int64_t i = 0; i < rows; ++i) {
            T* row = s + i * g.S;
            const auto r = detail::softmax_row_inplace(row, n);
            st[(r0 + i) * 2] = r.max;
            st[(r0 + i) * 2 + 1] = r.inv_sum;
            if (a_.dropout > 0) {
              dropout_factors(a_.key, a_.dropout, b * g.heads + h, r0 + i, g.L, g.S, n, f);
              for (std::int64_t j = 0; j < n; ++j) row[j] *= f[j];
            }
          }
          detail::gemm<T>(false, false, rows, g.Ev, n, T(1), s, g.S, v.at(b, h), v.ld, T(0), ob,
                          o.ld);
        }
      });
    });
  }
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta>) const override {
    const auto& q = in[0].shape;
    return 2.0 * static_cast<double>(q[0] * q[1] * q[2] * in[1].shape[2]) *
           static_cast<double>(q[3] + in[2].shape[3]) * (a_.causal ? 0.5 : 1.0);
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override;

 private:
  AttentionAttrs a_;
};

// Inputs {q, k, v, stats, grad_out [B, L, H, Ev] (unit inner stride), [mask]}; outputs
// {dq [B, L, H, E], dk [B, S, H, E], dv [B, S, H, Ev]}.
class AttentionBackwardOp final : public Op {
 public:
  explicit AttentionBackwardOp(AttentionAttrs a) : a_(a) {}
  std::string_view name() const override { return "attention_backward"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == (a_.has_mask ? 6u : 5u),
                "attention_backward: expected {} inputs, got {}", a_.has_mask ? 6 : 5, in.size());
    const TensorMeta &q = in[0], &k = in[1], &v = in[2], &go = in[4];
    const std::int64_t B = q.shape[0], H = q.shape[1], L = q.shape[2], S = k.shape[2];
    REMAT_CHECK(
        go.shape == Shape({B, L, H, v.shape[3]}) && (go.strides[3] == 1 || go.shape[3] <= 1),
        "attention_backward: internal error, gradient of shape {}", go.shape);
    return {TensorMeta::contiguous({B, L, H, q.shape[3]}, q.dtype, q.device),
            TensorMeta::contiguous({B, S, H, k.shape[3]}, q.dtype, q.device),
            TensorMeta::contiguous({B, S, H, v.shape[3]}, q.dtype, q.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Geometry g(in);
    if (g.batch * g.heads == 0) return;
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const Operand<T> q = operand<T>(in[0]), k = operand<T>(in[1]), v = operand<T>(in[2]);
      const T* stats = in[3].data<T>();
      const Shape& gs = in[4].meta->strides;
      const Operand<T> go{const_cast<T*>(in[4].data<T>()), gs[0], gs[2], gs[1]};
      const Operand<T> dq = heads_inner<T>(out[0], g.L, g.heads, g.E);
      const Operand<T> dk = heads_inner<T>(out[1], g.S, g.heads, g.E);
      const Operand<T> dv = heads_inner<T>(out[2], g.S, g.heads, g.Ev);
      const KernelArg* mask = a_.has_mask ? &in[5] : nullptr;
      const T scale = static_cast<T>(a_.scale);
      const std::int64_t rb = block_rows(g, a_, sizeof(T));
      over_heads(g, [&](std::int64_t b, std::int64_t h) {
        const std::int64_t block = rb * std::max<std::int64_t>(g.S, 1);
        T* p = scratch<T>(static_cast<std::size_t>(block * 3));  // P, dP, dropped P
        T* dp = p + block;
        T* pd = dp + block;
        const T* st = stats + (b * g.heads + h) * g.L * 2;
        if (g.S == 0 || g.L == 0) {  // nothing flows: zero gradients
          for (std::int64_t i = 0; i < g.L; ++i) std::fill_n(dq.at(b, h) + i * dq.ld, g.E, T(0));
          for (std::int64_t j = 0; j < g.S; ++j) {
            std::fill_n(dk.at(b, h) + j * dk.ld, g.E, T(0));
            std::fill_n(dv.at(b, h) + j * dv.ld, g.Ev, T(0));
          }
          return;
        }
        // Causal blocks reach keys no earlier block reached: dK and dV start from zero and
        // every block accumulates.
        if (a_.causal) {
          for (std::int64_t j = 0; j < g.S; ++j) {
            std::fill_n(dk.at(b, h) + j * dk.ld, g.E, T(0));
            std::fill_n(dv.at(b, h) + j * dv.ld, g.Ev, T(0));
          }
        }
        for (std::int64_t r0 = 0; r0 < g.L; r0 += rb) {
          const std::int64_t rows = std::min(rb, g.L - r0);
          const std::int64_t n = keys_of(g, a_, r0, rows);
          const T beta = r0 == 0 && !a_.causal ? T(0) : T(1);
          const T* gob = go.at(b, h) + r0 * go.ld;
          // The forward's weights, bit for bit: the same scores, exp(s - max) * (1 / sum).
          scores(g, scale, q, k, mask, a_.causal, b, h, r0, rows, n, p);
          for (std::int64_t i = 0; i < rows; ++i) {
            T* row = p + i * g.S;
            const T mx = st[(r0 + i) * 2], inv = st[(r0 + i) * 2 + 1];
            detail::exp_diff(row, &mx, 0, row, n);
            for (std::int64_t j = 0; j < n; ++j) row[j] *= inv;
          }
          // dP' = dO V^T, on the dropped weights P' = P * f.
          detail::gemm<T>(false, true, rows, n, g.Ev, T(1), gob, go.ld, v.at(b, h), v.ld, T(0), dp,
                          g.S);
          const T* weights = p;
          if (a_.dropout > 0) {
            for (std::int64_t i = 0; i < rows; ++i) {
              T* f = pd + i * g.S;
              dropout_factors(a_.key, a_.dropout, b * g.heads + h, r0 + i, g.L, g.S, n, f);
              T* dpr = dp + i * g.S;
              const T* pr = p + i * g.S;
              for (std::int64_t j = 0; j < n; ++j) {
                dpr[j] *= f[j];
                f[j] *= pr[j];
              }
            }
            weights = pd;
          }
          // dV += P'^T dO.
          detail::gemm<T>(true, false, n, g.Ev, rows, T(1), weights, g.S, gob, go.ld, beta,
                          dv.at(b, h), dv.ld);
          // dS = P * (dP - sum_j P dP), in place of dP.
          for (std::int64_t i = 0; i < rows; ++i) {
            const T* pr = p + i * g.S;
            T* dpr = dp + i * g.S;
            const T d = static_cast<T>(detail::lane_dot(pr, dpr, n));
            for (std::int64_t j = 0; j < n; ++j) dpr[j] = pr[j] * (dpr[j] - d);
          }
          // dQ = scale dS K;  dK += scale dS^T Q.
          detail::gemm<T>(false, false, rows, g.E, n, scale, dp, g.S, k.at(b, h), k.ld, T(0),
                          dq.at(b, h) + r0 * dq.ld, dq.ld);
          detail::gemm<T>(true, false, n, g.E, rows, scale, dp, g.S, q.at(b, h) + r0 * q.ld, q.ld,
                          beta, dk.at(b, h), dk.ld);
        }
      });
    });
  }
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta>) const override {
    const auto& q = in[0].shape;
    return 2.0 * static_cast<double>(q[0] * q[1] * q[2] * in[1].shape[2]) *
           static_cast<double>(3 * q[3] + 2 * in[2].shape[3]) * (a_.causal ? 0.5 : 1.0);
  }

 private:
  AttentionAttrs a_;
};

Tensor heads_to_front(const Tensor& t) {  // [B, rows, H, cols] -> [B, H, rows, cols]
  return permute(t, {0, 2, 1, 3});
}

// The derivative as public ops, for create_graph: recomputes the weights with grad enabled, so
// the result is differentiable in q, k, v and the incoming gradient.
std::vector<Tensor> composed_backward(const AttentionAttrs& a, const Tensor& q, const Tensor& k,
                                      const Tensor& v, const Tensor& mask, const Tensor& go) {
  Tensor s = mul(matmul(q, transpose(k, -2, -1)), a.scale);
  if (mask.defined()) s = add(s, mask);
  if (a.causal)
    s = add(s, triu(full({q.size(-2), k.size(-2)}, -std::numeric_limits<double>::infinity(),
                         {.dtype = q.dtype()}),
                    1));
  const Tensor p = softmax(s, -1);
  // Dropout is diagonal and linear: the same factors on the weights and on their gradient.
  auto drop = [&](const Tensor& t) {
    if (a.dropout == 0) return t;
    return a.dropout >= 1 ? mul(t, 0.0) : detail::dropout_with_key(t, a.dropout, a.key);
  };
  const Tensor pd = drop(p);
  const Tensor dv = matmul(transpose(pd, -2, -1), go);
  const Tensor dp = drop(matmul(go, transpose(v, -2, -1)));
  const Tensor ds = mul(p, sub(dp, sum(mul(dp, p), {-1}, true)));
  return {mul(matmul(ds, k), a.scale), mul(matmul(transpose(ds, -2, -1), q), a.scale), dv};
}

std::vector<Tensor> AttentionOp::backward(const BackwardContext& c) const {
  REMAT_CHECK(!(a_.has_mask && c.needs(3)),
              "attention: the mask requires grad; differentiate through matmul and softmax "
              "instead");
  const Tensor &q = c.input(0), &k = c.input(1), &v = c.input(2);
  const Tensor mask = a_.has_mask ? c.input(3) : Tensor();
  std::vector<Tensor> grads(c.input_metas.size());
  if (GradMode::is_enabled()) {
    auto r = composed_backward(a_, q, k, v, mask, heads_to_front(c.grad(0)));
    for (int i = 0; i < 3; ++i)
      if (c.needs(i)) grads[i] = r[i];
    return grads;
  }
  const Tensor& go = c.grad(0);
  const Tensor go_ready = go.stride(-1) == 1 || go.size(-1) <= 1 ? go : contiguous(go);
  std::vector<Tensor> in{q, k, v, c.output(1), go_ready};
  if (a_.has_mask) in.push_back(mask);
  const auto r = call(std::make_shared<AttentionBackwardOp>(a_), in);
  for (int i = 0; i < 3; ++i)
    if (c.needs(i)) grads[i] = heads_to_front(r[i]);
  return grads;
}

// [..., rows, cols] as [B, H, rows, cols]: rank 2 is one head of one batch, rank 3 is a batch
// of one head each, rank 4 is itself, and higher ranks fold into the batch.
Tensor as_4d(const Tensor& t) {
  const std::int64_t d = t.dim();
  if (d == 4) return t;
  const std::int64_t rows = t.size(-2), cols = t.size(-1);
  if (d == 2) return reshape(t, {1, 1, rows, cols});
  if (d == 3) return unsqueeze(t, 1);
  std::int64_t batch = 1;
  for (std::int64_t i = 0; i + 3 < d; ++i) batch *= t.size(i);
  return reshape(t, {batch, t.size(-3), rows, cols});
}

Tensor unit_inner(const Tensor& t) {
  return t.stride(-1) == 1 || t.size(-1) <= 1 ? t : contiguous(t);
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                 double scale, double dropout_p, bool training, bool is_causal) {
  REMAT_CHECK(q.defined() && k.defined() && v.defined(),
              "attention: query, key or value is an undefined tensor");
  REMAT_CHECK(is_floating(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(),
              "attention: expected floating-point query, key and value of one dtype, got {}, {} "
              "and {}",
              q.dtype(), k.dtype(), v.dtype());
  REMAT_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim() &&
                  k.size(-1) == q.size(-1) && v.size(-2) == k.size(-2),
              "attention: queries {}, keys {} and values {} do not match ([..., L, E], [..., S, "
              "E], [..., S, Ev])",
              q.shape(), k.shape(), v.shape());
  for (std::int64_t i = 0; i + 2 < q.dim(); ++i)
    REMAT_CHECK(k.size(i) == q.size(i) && v.size(i) == q.size(i),
                "attention: queries {}, keys {} and values {} differ in their leading dims",
                q.shape(), k.shape(), v.shape());
  REMAT_CHECK(dropout_p >= 0 && dropout_p <= 1, "attention: dropout must be in [0, 1], got {}",
              dropout_p);
  REMAT_CHECK(std::isfinite(scale), "attention: scale must be finite, got {}", scale);
  AttentionAttrs a;
  a.scale = scale;
  a.causal = is_causal;
  if (training && dropout_p > 0) {
    a.dropout = dropout_p;
    a.key = next_rng_key();
  }
  const Tensor q4 = unit_inner(as_4d(q)), k4 = unit_inner(as_4d(k)), v4 = unit_inner(as_4d(v));
  std::vector<Tensor> in{q4, k4, v4};
  if (mask.defined()) {
    REMAT_CHECK(!mask.requires_grad() || !GradMode::is_enabled(),
                "attention: the mask of shape {} requires grad; differentiate through matmul "
                "and softmax instead",
                mask.shape());
    REMAT_CHECK(mask.dtype() == DType::Int64 || mask.dtype() == q.dtype(),
                "attention: the mask must be int64 (non-zero forbids) or {} (added), got {}",
                q.dtype(), mask.dtype());
    Shape full(q.shape().begin(), q.shape().end() - 1);
    full.push_back(k.size(-2));
    bool fits = mask.dim() <= static_cast<std::int64_t>(full.size());
    for (std::int64_t i = 1; fits && i <= mask.dim(); ++i)
      fits = mask.size(-i) == 1 || mask.size(-i) == full[full.size() - i];
    REMAT_CHECK(fits, "attention: the mask of shape {} does not broadcast to the scores {}",
                mask.shape(), full);
    const Tensor additive = mask.dtype() == DType::Int64
                                ? masked_fill(zeros(mask.shape(), {.dtype = q.dtype()}), mask,
                                              -std::numeric_limits<double>::infinity())
                                : mask;
    in.push_back(as_4d(expand(additive, full)));
    a.has_mask = true;
  }
  const auto r = call(std::make_shared<AttentionOp>(a), in);
  Shape out_shape(q.shape().begin(), q.shape().end() - 1);
  out_shape.push_back(v.size(-1));
  return reshape(heads_to_front(r[0]), out_shape);
}

}  // namespace remat
