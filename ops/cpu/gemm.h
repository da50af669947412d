// Internal: C = alpha * op(A) op(B) + beta * C for row-major strided matrices, float32 through
// oneDNN's sgemm and float64 through Eigen (gradient checks), so kernels other than matmul's
// (fused attention) call one function for both dtypes.  op(X) is X, or X^T when trans is set;
// lda, ldb, ldc are the row strides of the stored matrices.
// Usage: detail::gemm<float>(false, true, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, ldc);
#pragma once
#include <cstdint>

namespace remat::detail {

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
          std::int64_t ldc);

extern template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float,
                                 const float*, std::int64_t, const float*, std::int64_t, float,
                                 float*, std::int64_t);
extern template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double,
                                  const double*, std::int64_t, const double*, std::int64_t, double,
                                  double*, std::int64_t);

}  // namespace remat::detail
