// Internal: the CUDA kernels' entry points, called by the ops' cuda() kernels.  Plain types only
// (pointers, element strides, sizes, kinds as ints), so nvcc compiles the kernels without the
// framework's headers and the framework's headers stay free of CUDA.  Every launch runs on the
// current device's default stream; nothing here synchronises.
// Usage: cuda_launch::binary(kind, Scalar::Float32, extent, out, a, b);
#pragma once
#include <cstdint>

namespace remat::detail::cuda_launch {

inline constexpr int kMaxDims = 8;

enum class Scalar : int { Float32, Float64, Int64 };

// The shape a kernel iterates over, and each operand's element strides over it (0 broadcasts).
struct Extent {
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
};
struct Operand {
  void* data = nullptr;
  std::int64_t strides[kMaxDims] = {};
};

// out[i] = value for i < n (contiguous).
void fill(Scalar t, void* out, std::int64_t n, double value);
// out[i] = start + step * i.
void arange(Scalar t, void* out, std::int64_t n, double start, double step);
// out = in converted to out's scalar type, both strided over the extent.
void copy(Scalar out_t, Scalar in_t, const Extent& e, const Operand& out, const Operand& in);
// out = a (kind) b with the kinds and arithmetic of ops/elementwise_math.h.
void binary(int kind, Scalar t, const Extent& e, const Operand& out, const Operand& a,
            const Operand& b);

// out = kind(in) with the kinds of ops/elementwise_math.h's Unary (p, q: its attributes; has_p,
// has_q: which bounds a clamp has).  Integer tensors take only neg, abs, sign, relu and clamp.
void unary(int kind, Scalar t, const Extent& e, const Operand& out, const Operand& in, double p,
           double q, bool has_p, bool has_q);
// out = cond != 0 ? a : b, cond of scalar type cond_t, a, b and out of type t.
void where(Scalar cond_t, Scalar t, const Extent& e, const Operand& out, const Operand& cond,
           const Operand& a, const Operand& b);
// out = self (kind) others for the in-place kinds of ops/elementwise_math.h but Copy (which is
// `copy`): self is `a`, the others `b` and `c` (unused ones ignored), value the kind's scalar.
void inplace(int kind, Scalar t, const Extent& e, const Operand& out, const Operand& a,
             const Operand& b, const Operand& c, double value);

// out[o] = the sum of `in` over the reduced extent at output o of the kept extent, accumulated
// in double (int64 for int64), in an order fixed by the shape (the CPU's row-major order for
// fewer than 128 reduced elements, a tree over 256 strided partial sums for more); `kept` and
// `reduced` hold in's strides over those dims; out is contiguous.
void sum(Scalar t, const Extent& kept_extent, const Operand& kept, const Extent& reduced_extent,
         const Operand& reduced, void* out);

// (log_)softmax along the middle dim of a contiguous [outer, d, inner] tensor: per column the
// max, then the sum of exponentials in double, as the CPU kernel.
void softmax(Scalar t, std::int64_t outer, std::int64_t d, std::int64_t inner, const void* x,
             void* y, bool log);
// Its first derivative along the innermost dim of contiguous [rows, n] tensors g and y (y the
// output): log: dx = g - exp(y) sum(g); softmax: dx = y (g - sum(g y)), the sums in double.
void softmax_backward(Scalar t, std::int64_t rows, std::int64_t n, const void* g, const void* y,
                      void* dx, bool log);
// Negative log-likelihood per target of contiguous logp [N, C, inner] and int64 targets
// [N, inner]: loss = -w[t] logp[n, t, j], wt = w[t] (weight null: 1), index = t; 0, 0, 0 where
// t == ignore_index or out of range.  Returns the first out-of-range target's position, or -1
// (reading it back waits for the kernel).
std::int64_t nll_loss(Scalar t, std::int64_t n_targets, std::int64_t classes, std::int64_t inner,
                      const void* logp, const std::int64_t* target, const void* weight,
                      std::int64_t ignore_index, void* loss, void* wt, std::int64_t* index);
// Max (or min) over `reduced` elements `red_stride` apart from each output's offset in the kept
// extent: the value and the first index of the extreme, NaN counting as the extreme.
void extreme(bool is_max, Scalar t, const Extent& kept_extent, const Operand& kept,
             std::int64_t reduced, std::int64_t red_stride, void* values, std::int64_t* indices);
// out[.., index[.., k, ..], ..] += src[.., k, ..] along one dim, for k in 0..count in order
// (repeated indices sum deterministically): `slices` is the index's extent with that dim of
// size 1; each operand holds its strides over it, and *_step its stride along the dim.  Returns
// the first position (slice * count + k) whose index is outside 0..out_size, or -1 (reading it
// back waits for the kernel).
std::int64_t scatter_add(Scalar t, const Extent& slices, std::int64_t count, const Operand& index,
                         std::int64_t index_step, const Operand& src, std::int64_t src_step,
                         const Operand& out, std::int64_t out_step, std::int64_t out_size);
// out = data[.., index, ..] along one dim over the index's extent: `data` holds data's strides
// with that dim's zeroed, data_step its stride along the dim.  Returns the first element whose
// index is outside 0..data_size, or -1 (reading it back waits for the kernel).
std::int64_t gather(Scalar t, const Extent& e, const Operand& index, const Operand& data,
                    std::int64_t data_step, std::int64_t data_size, const Operand& out);
// SGD on n contiguous elements, PyTorch's update: d = g + wd p; buf = mu buf + (1 - dampening) d
// (buf null: no momentum); d = nesterov ? d + mu buf : buf; p -= lr d.  In and out may alias.
void sgd_step(Scalar t, std::int64_t n, const void* param, const void* buf, const void* grad,
              void* param_out, void* buf_out, double lr, double momentum, double dampening,
              double weight_decay, bool nesterov);

// C = alpha * op(A) op(B) + beta * C on the current device, row-major with row strides lda,
// ldb, ldc (cuBLAS without TF32: float32 products in float32, bit-reproducible on one GPU).
void gemm(Scalar t, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          double alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
          double beta, void* c, std::int64_t ldc);

}  // namespace remat::detail::cuda_launch
