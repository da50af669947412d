#include "ops/cpu/gemm.h"

#include <Eigen/Core>

#include "ops/cpu/onednn.h"

namespace remat::detail {

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
          std::int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    using Eigen::Dynamic, Eigen::Map, Eigen::OuterStride;
    using RowMat = Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>;
    using ColMat = Eigen::Matrix<T, Dynamic, Dynamic, Eigen::ColMajor>;
    if (m == 0 || n == 0) return;
    Map<RowMat, 0, OuterStride<>> cm(c, m, n, OuterStride<>(ldc));
    if (k == 0) {
      if (beta == T(0))
        cm.setZero();
      else
        cm *= beta;
      return;
    }
    auto run = [&](const auto& am, const auto& bm) {
      if (beta == T(0)) {
        cm.noalias() = alpha * (am * bm);
      } else {
        if (beta != T(1)) cm *= beta;
        cm.noalias() += alpha * (am * bm);
      }
    };
    // A transposed operand stored row-major is the same memory read column-major.
    auto with_b = [&](const auto& am) {
      if (trans_b)
        run(am, Map<const ColMat, 0, OuterStride<>>(b, k, n, OuterStride<>(ldb)));
      else
        run(am, Map<const RowMat, 0, OuterStride<>>(b, k, n, OuterStride<>(ldb)));
    };
    if (trans_a)
      with_b(Map<const ColMat, 0, OuterStride<>>(a, m, k, OuterStride<>(lda)));
    else
      with_b(Map<const RowMat, 0, OuterStride<>>(a, m, k, OuterStride<>(lda)));
  }
}

template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                          std::int64_t, const float*, std::int64_t, float, float*, std::int64_t);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double,
                           const double*, std::int64_t, const double*, std::int64_t, double,
                           double*, std::int64_t);

}  // namespace remat::detail
