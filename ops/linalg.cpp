#include "ops/linalg.h"

#include <algorithm>
#include <optional>

#include "ops/cpu/gemm.h"
#if REMAT_WITH_CUDA
#include "ops/cuda/device_args.h"
#endif
#include "ops/cpu/loops.h"
#include "ops/op.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace remat {
namespace {

// How a strided matrix is handed to GEMM: row-major with row stride ld (trans = false), or
// column-major with column stride ld (trans = true, e.g. a transposed view), so transposes
// cost no copy.
struct MatLayout {
  bool trans = false;
  std::int64_t ld = 1;
};

std::optional<MatLayout> gemm_layout(std::int64_t rows, std::int64_t cols, std::int64_t rs,
                                     std::int64_t cs) {
  const std::int64_t r1 = std::max<std::int64_t>(rows, 1), c1 = std::max<std::int64_t>(cols, 1);
  if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= c1))
    return MatLayout{false, rows <= 1 ? c1 : rs};
  if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= r1))
    return MatLayout{true, cols <= 1 ? r1 : cs};
  return std::nullopt;
}

std::optional<MatLayout> matrix_layout(const TensorMeta& m) {
  const auto d = m.dim();
  return gemm_layout(m.shape[d - 2], m.shape[d - 1], m.strides[d - 2], m.strides[d - 1]);
}

// A copy only when the last two dims cannot be described to GEMM (e.g. expanded rows).
Tensor gemm_ready(const Tensor& t) {
  return matrix_layout(t.meta()) ? t : contiguous(t);
}

// C (m x n, row stride ldc) = op(A) op(B) + beta * C.
template <class T>
void gemm(MatLayout la, MatLayout lb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a,
          const T* b, T beta, T* c, std::int64_t ldc) {
  detail::gemm<T>(la.trans, lb.trans, m, n, k, T(1), a, la.ld, b, lb.ld, beta, c, ldc);
}

// Product of all dims but the last (rows of the 2-D view of t); well defined when the last is 0.
std::int64_t leading_rows(const Tensor& t) {
  std::int64_t n = 1;
  for (std::int64_t d = 0; d + 1 < t.dim(); ++d) n *= t.size(d);
  return n;
}

Shape batch_of(const Shape& s) {
  return Shape(s.begin(), s.end() - 2);
}

// Element offset of every matrix of `t` in a broadcast batch of shape `batch`.
std::vector<std::int64_t> batch_offsets(const TensorMeta& t, const Shape& batch) {
  const std::int64_t nb = shape_numel(batch);
  const std::size_t lead = batch.size() - (t.shape.size() - 2);
  std::vector<std::int64_t> offs(nb, 0);
  for (std::int64_t i = 0; i < nb; ++i) {
    std::int64_t rem = i, off = 0;
    for (std::size_t d = batch.size(); d-- > 0;) {
      const std::int64_t idx = rem % batch[d];
      rem /= batch[d];
      if (d >= lead && t.shape[d - lead] != 1) off += idx * t.strides[d - lead];
    }
    offs[i] = off;
  }
  return offs;
}

void check_floating_pair(std::string_view op, const TensorMeta& a, const TensorMeta& b) {
  REMAT_CHECK(a.dtype == b.dtype, "{}: dtype mismatch, {} (shape {}) vs {} (shape {})", op, a.dtype,
              a.shape, b.dtype, b.shape);
  REMAT_CHECK(is_floating(a.dtype),
              "{}: expected float32 or float64 tensors, got {} (shapes {} and {}); integer matrix "
              "products are not supported",
              op, a.dtype, a.shape, b.shape);
}

// The batched product a [..., m, k] @ b [..., k, n] with broadcast batch dims.  The public
// matmul reduces every case (1-D operands, folded batches) to this one.
class MatmulOp final : public Op {
 public:
  std::string_view name() const override { return "matmul"; }
  SaveSpec saves() const override { return {0b11, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 2, "matmul: expected 2 inputs, got {}", in.size());
    const TensorMeta &a = in[0], &b = in[1];
    REMAT_CHECK(a.dim() >= 2 && b.dim() >= 2,
                "matmul: expected operands of at least 2 dims, got shapes {} and {}", a.shape,
                b.shape);
    check_floating_pair("matmul", a, b);
    REMAT_CHECK(a.shape[a.dim() - 1] == b.shape[b.dim() - 2],
                "matmul: shapes {} and {} cannot be multiplied ({} != {})", a.shape, b.shape,
                a.shape[a.dim() - 1], b.shape[b.dim() - 2]);
    Shape out = broadcast_shapes("matmul", batch_of(a.shape), batch_of(b.shape));
    out.push_back(a.shape[a.dim() - 2]);
    out.push_back(b.shape[b.dim() - 1]);
    return {TensorMeta::contiguous(std::move(out), a.dtype, a.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta &am = *in[0].meta, &bm = *in[1].meta, &om = *out[0].meta;
    const std::int64_t m = am.shape[am.dim() - 2], k = am.shape[am.dim() - 1],
                       n = bm.shape[bm.dim() - 1];
    const Shape batch = batch_of(om.shape);
    const std::int64_t nb = shape_numel(batch);
    const MatLayout la = *matrix_layout(am), lb = *matrix_layout(bm);
    const auto aoff = batch_offsets(am, batch), boff = batch_offsets(bm, batch);
    detail::visit_floating(am.dtype, [&]<class T>() {
      const T* a = in[0].data<T>();
      const T* b = in[1].data<T>();
      T* c = out[0].data<T>();
      auto one = [&](std::int64_t i) {
        gemm<T>(la, lb, m, n, k, a + aoff[i], b + boff[i], T(0), c + i * m * n, n);
      };
      // Large products thread inside GEMM; many small ones are spread over the batch instead.
      // The choice depends only on shapes, so results stay deterministic.
      if (nb == 1 || m * n * k >= (1 << 18)) {
        for (std::int64_t i = 0; i < nb; ++i) one(i);
      } else {
        parallel_for(0, nb, 1, [&](std::int64_t b0, std::int64_t b1) {
          for (std::int64_t i = b0; i < b1; ++i) one(i);
        });
      }
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta &am = *in[0].meta, &bm = *in[1].meta, &om = *out[0].meta;
    const std::int64_t m = am.shape[am.dim() - 2], k = am.shape[am.dim() - 1],
                       n = bm.shape[bm.dim() - 1];
    const Shape batch = batch_of(om.shape);
    const MatLayout la = *matrix_layout(am), lb = *matrix_layout(bm);
    const auto aoff = batch_offsets(am, batch), boff = batch_offsets(bm, batch);
    const auto es = static_cast<std::int64_t>(element_size(am.dtype));
    const char* a = in[0].bytes();
    const char* b = in[1].bytes();
    char* c = out[0].bytes();
    for (std::int64_t i = 0; i < shape_numel(batch); ++i)
      detail::cuda_launch::gemm(detail::scalar_of(am.dtype), la.trans, lb.trans, m, n, k, 1.0,
                                a + aoff[i] * es, la.ld, b + boff[i] * es, lb.ld, 0.0,
                                c + i * m * n * es, n);
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override;
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta> out) const override {
    const auto& a = in[0];
    return 2.0 * static_cast<double>(out[0].numel()) * static_cast<double>(a.shape[a.dim() - 1]);
  }
};

// Batched product of operands with at least 2 dims, through the op.
Tensor mm(const Tensor& a, const Tensor& b) {
  static const auto op = std::make_shared<MatmulOp>();
  return call1(op, {gemm_ready(a), gemm_ready(b)});
}

Tensor mT(const Tensor& t) {
  return transpose(t, -2, -1);
}

std::vector<Tensor> MatmulOp::backward(const BackwardContext& c) const {
  const Tensor& g = c.grad(0);
  Tensor ga, gb;
  if (c.needs(0)) ga = sum_to(mm(g, mT(c.input(1))), c.input_meta(0).shape);
  if (c.needs(1)) gb = sum_to(mm(mT(c.input(0)), g), c.input_meta(1).shape);
  return {ga, gb};
}

// x [rows, in] @ weight [out, in]^T (+ bias [out]); the bias is fused into the GEMM by
// starting from the broadcast bias with beta = 1.
class LinearOp final : public Op {
 public:
  std::string_view name() const override { return "linear"; }
  SaveSpec saves() const override { return {0b011, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 2 || in.size() == 3, "linear: expected 2 or 3 inputs, got {}",
                in.size());
    const TensorMeta &x = in[0], &w = in[1];
    check_floating_pair("linear", x, w);
    REMAT_CHECK(x.dim() == 2 && w.dim() == 2 && x.shape[1] == w.shape[1],
                "linear: input of shape {} does not match weight of shape {}", x.shape, w.shape);
    if (in.size() == 3)
      REMAT_CHECK(in[2].dtype == x.dtype && in[2].dim() == 1 && in[2].shape[0] == w.shape[0],
                  "linear: bias of shape {} ({}) does not match weight of shape {} ({})",
                  in[2].shape, in[2].dtype, w.shape, w.dtype);
    return {TensorMeta::contiguous({x.shape[0], w.shape[0]}, x.dtype, x.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta &xm = *in[0].meta, &wm = *in[1].meta;
    const std::int64_t rows = xm.shape[0], k = xm.shape[1], n = wm.shape[0];
    const MatLayout lx = *matrix_layout(xm), lw = *matrix_layout(wm);
    const MatLayout lwt{!lw.trans, lw.ld};  // weight^T
    detail::visit_floating(xm.dtype, [&]<class T>() {
      T* c = out[0].data<T>();
      T beta = 0;
      if (in.size() == 3) {
        const T* bias = in[2].data<T>();
        const std::int64_t bs = in[2].meta->strides[0];
        // Row 0 gathers the bias (any stride), the other rows copy row 0.
        for (std::int64_t j = 0; j < n; ++j) c[j] = bias[j * bs];
        for (std::int64_t r = 1; r < rows; ++r) std::copy_n(c, n, c + r * n);
        beta = 1;
      }
      gemm<T>(lx, lwt, rows, n, k, in[0].data<T>(), in[1].data<T>(), beta, c, n);
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta &xm = *in[0].meta, &wm = *in[1].meta;
    const std::int64_t rows = xm.shape[0], k = xm.shape[1], n = wm.shape[0];
    const MatLayout lx = *matrix_layout(xm), lw = *matrix_layout(wm);
    const auto t = detail::scalar_of(xm.dtype);
    double beta = 0;
    if (in.size() == 3) {  // the bias broadcast over the rows, then C += x w^T
      const Shape& shape = out[0].meta->shape;
      detail::cuda_launch::copy(t, t, detail::extent_of(shape), detail::operand_of(out[0], shape),
                                detail::operand_of(in[2], shape));
      beta = 1;
    }
    detail::cuda_launch::gemm(t, lx.trans, !lw.trans, rows, n, k, 1.0, in[0].bytes(), lx.ld,
                              in[1].bytes(), lw.ld, beta, out[0].bytes(), n);
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    std::vector<Tensor> grads(c.input_metas.size());
    // The weight's gradient first, as conv2d's: x is not needed after it, and a fresh input
    // gradient is not there to be evicted while it is computed.
    if (c.needs(1)) grads[1] = mm(mT(g), c.input(0));
    if (c.needs(0)) grads[0] = mm(g, c.input(1));
    if (grads.size() == 3 && c.needs(2)) grads[2] = sum(g, {0});
    return grads;
  }
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta> out) const override {
    return 2.0 * static_cast<double>(out[0].numel()) * static_cast<double>(in[0].shape[1]) +
           (in.size() == 3 ? static_cast<double>(out[0].numel()) : 0.0);
  }
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  REMAT_CHECK(a.defined() && b.defined(), "matmul: an operand is an undefined tensor");
  REMAT_CHECK(a.dim() >= 1 && b.dim() >= 1,
              "matmul: both operands need at least 1 dim, got shapes {} and {}", a.shape(),
              b.shape());
  check_floating_pair("matmul", a.meta(), b.meta());
  const std::int64_t k = a.shape().back(), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  REMAT_CHECK(k == kb, "matmul: shapes {} and {} cannot be multiplied ({} != {})", a.shape(),
              b.shape(), k, kb);
  if (a.dim() > 2 && b.dim() > 2) {
    const Shape ba = batch_of(a.shape()), bb = batch_of(b.shape());
    for (std::size_t i = 1; i <= std::min(ba.size(), bb.size()); ++i) {
      const auto x = ba[ba.size() - i], y = bb[bb.size() - i];
      REMAT_CHECK(x == y || x == 1 || y == 1,
                  "matmul: batch dims of shapes {} and {} do not broadcast", a.shape(), b.shape());
    }
  }

  if (a.dim() == 1 && b.dim() == 1) return reshape(mm(reshape(a, {1, k}), reshape(b, {k, 1})), {});
  if (a.dim() > 2 && b.dim() <= 2) {
    // A stack of rows times one matrix is one GEMM over all rows.
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    if (b.dim() == 2) out_shape.push_back(b.size(1));
    const Tensor b2 = b.dim() == 1 ? reshape(b, {k, 1}) : b;
    return reshape(mm(reshape(a, {leading_rows(a), k}), b2), out_shape);
  }
  Tensor out = mm(a.dim() == 1 ? unsqueeze(a, 0) : a, b.dim() == 1 ? unsqueeze(b, 1) : b);
  if (a.dim() == 1) out = squeeze(out, -2);
  if (b.dim() == 1) out = squeeze(out, -1);
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  static const auto op = std::make_shared<LinearOp>();
  REMAT_CHECK(x.defined() && weight.defined(), "linear: input or weight is an undefined tensor");
  check_floating_pair("linear", x.meta(), weight.meta());
  REMAT_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out, in], got shape {}",
              weight.shape());
  REMAT_CHECK(x.dim() >= 1 && x.shape().back() == weight.size(1),
              "linear: input of shape {} does not match weight of shape {} (expected last dim {})",
              x.shape(), weight.shape(), weight.size(1));
  if (bias.defined())
    REMAT_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0) && bias.dtype() == weight.dtype(),
                "linear: bias of shape {} ({}) does not match weight of shape {} ({})",
                bias.shape(), bias.dtype(), weight.shape(), weight.dtype());
  const std::int64_t in = weight.size(1);
  const Tensor x2 = gemm_ready(x.dim() == 2 ? x : reshape(x, {leading_rows(x), in}));
  const Tensor w2 = gemm_ready(weight);
  Tensor y = bias.defined() ? call1(op, {x2, w2, bias}) : call1(op, {x2, w2});
  if (x.dim() == 2) return y;
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(weight.size(0));
  return reshape(y, out_shape);
}

}  // namespace remat
