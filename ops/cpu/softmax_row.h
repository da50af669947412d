// Internal: the row kernels softmax and fused attention share.  A row's softmax is its maximum,
// exp(x - max) with vec_math's exp, a sum in double with eight lanes, then one multiply by
// 1 / sum in the element type; attention keeps (max, 1 / sum) and recomputes the same bits.
// Usage: const RowStats s = softmax_row_inplace(row, n);
#pragma once
#include <cstdint>

#include "ops/cpu/lane_sum.h"
#include "ops/cpu/vec_math.h"

namespace remat::detail {

template <class T>
T row_max(const T* p, std::int64_t n) {
  T m = p[0];
#pragma omp simd reduction(max : m)
  for (std::int64_t i = 1; i < n; ++i) m = p[i] > m ? p[i] : m;
  return m;
}

// y[i] = exp(x[i] - s[i]) (s_stride 1) or exp(x[i] - s[0]) (s_stride 0).  vexp is the same
// straight-line code for every element, so a replay into another buffer gives identical bits,
// and exp(-inf) is exactly 0: a -inf mask entry gets probability 0, as in PyTorch.
template <class T>
void exp_diff(const T* x, const T* s, std::int64_t s_stride, T* y, std::int64_t n) {
  if (s_stride) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = vexp(static_cast<T>(x[i] - s[i]));
  } else {
    const T m = s[0];
    for (std::int64_t i = 0; i < n; ++i) y[i] = vexp(static_cast<T>(x[i] - m));
  }
}

template <class T>
struct RowStats {
  T max, inv_sum;
};

// Softmax of a row in place; returns what recomputes it: y = exp(x - max) * inv_sum.
template <class T>
RowStats<T> softmax_row_inplace(T* x, std::int64_t n) {
  const T m = row_max(x, n);
  exp_diff(x, &m, 0, x, n);
  const T inv = static_cast<T>(1.0 / lane_sum(x, n));
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
  return {m, inv};
}

}  // namespace remat::detail
