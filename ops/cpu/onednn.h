// Internal: the float32 oneDNN kernels behind matmul, linear and conv2d.  Convolution primitives
// and their layout reorders are created once per geometry and thread count, then reused.
// Usage: detail::sgemm(false, true, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, ldc);
#pragma once
#include <cstddef>
#include <cstdint>

namespace remat::detail {

// C = alpha * op(A) * op(B) + beta * C, all row-major; op(X) is X or X^T.  op(A) is m x k,
// op(B) is k x n; lda/ldb/ldc are the row strides of the stored matrices.
void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc);

// A 2-D convolution in PyTorch's terms: NCHW input, OIHW weights (O x C/groups x KH x KW),
// padding pad_h/pad_w at the top/left and that plus extra_h/extra_w at the bottom/right (extra is
// 1 only for padding "same" with an odd total), dilation 1 meaning none.
struct ConvGeometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t o = 0, kh = 0, kw = 0;       // weights
  std::int64_t oh = 0, ow = 0;              // output
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  std::int64_t extra_h = 0, extra_w = 0;
  std::int64_t groups = 1;
  bool operator==(const ConvGeometry&) const = default;
};

// All buffers are dense in the framework's plain layouts (NCHW, OIHW, bias of O elements).
void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                    float* y);
void conv2d_backward_data(const ConvGeometry& g, const float* gy, const float* w, float* gx);
void conv2d_backward_weights(const ConvGeometry& g, const float* x, const float* gy, float* gw);

// Convolution primitives created so far (each cached entry holds one primitive and its reorders).
std::size_t conv_primitive_cache_size();

}  // namespace remat::detail
