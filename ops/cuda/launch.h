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

// out[o] = the sum of `in` over the reduced extent at output o of the kept extent, in row-major
// order (the CPU's order), accumulated in double (int64 for int64); `kept` and `reduced` hold
// in's strides over those dims; out is contiguous.
void sum(Scalar t, const Extent& kept_extent, const Operand& kept, const Extent& reduced_extent,
         const Operand& reduced, void* out);

// C = alpha * op(A) op(B) + beta * C on the current device, row-major with row strides lda,
// ldb, ldc (cuBLAS without TF32: float32 products in float32, bit-reproducible on one GPU).
void gemm(Scalar t, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          double alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
          double beta, void* c, std::int64_t ldc);

}  // namespace remat::detail::cuda_launch
