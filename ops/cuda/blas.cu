// GEMM on the GPU through cuBLAS.  Row-major products are column-major ones with the operands
// swapped: C^T = op(B)^T op(A)^T.  One handle per thread and device; the default math mode (no
// TF32), whose algorithms give the same bits for the same call on the same GPU, so a
// rematerialized tensor equals the original.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "ops/cuda/launch.h"

namespace remat::detail::cuda_launch {
namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS ") + what + " failed with status " +
                             std::to_string(static_cast<int>(s)));
}

cublasHandle_t handle() {
  int device = 0;
  cudaGetDevice(&device);
  constexpr int kMaxDevices = 64;
  thread_local cublasHandle_t handles[kMaxDevices] = {};
  if (!handles[device]) {
    check(cublasCreate(&handles[device]), "cublasCreate");
    check(cublasSetMathMode(handles[device], CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  return handles[device];
}

int as_int(std::int64_t v, const char* what) {
  if (v > 2147483647) throw std::runtime_error(std::string("cuBLAS: ") + what + " too large");
  return static_cast<int>(v);
}

}  // namespace

void gemm(Scalar t, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          double alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
          double beta, void* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int M = as_int(m, "m"), N = as_int(n, "n"), K = as_int(k, "k");
  const int LDA = as_int(lda, "lda"), LDB = as_int(ldb, "ldb"), LDC = as_int(ldc, "ldc");
  if (t == Scalar::Float32) {
    const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
    check(cublasSgemm(handle(), op_b, op_a, N, M, K, &al, static_cast<const float*>(b), LDB,
                      static_cast<const float*>(a), LDA, &be, static_cast<float*>(c), LDC),
          "sgemm");
  } else if (t == Scalar::Float64) {
    check(cublasDgemm(handle(), op_b, op_a, N, M, K, &alpha, static_cast<const double*>(b), LDB,
                      static_cast<const double*>(a), LDA, &beta, static_cast<double*>(c), LDC),
          "dgemm");
  } else {
    throw std::runtime_error("cuBLAS: integer matrix products are not supported");
  }
}

}  // namespace remat::detail::cuda_launch
