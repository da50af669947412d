// Internal: the negative log-likelihood of one target, shared by the CPU kernel (ops/loss.cpp)
// and the CUDA kernel (ops/cuda/rows.cu), so both devices follow one definition.  Plain C++17
// that nvcc also compiles.
#pragma once
#include <cstdint>

#include "ops/elementwise_math.h"  // REMAT_HD

namespace remat::detail {

// Target i of [N, inner] against log-probabilities [N, C, inner] (contiguous): loss = -w[t]
// logp[n, t, j], wt = w[t] (1 without weights), index = t.  An ignored or out-of-range target
// gets 0, 0, 0; the result is false only when it is out of range (the caller reports it).
template <class T>
REMAT_HD bool nll_target(std::int64_t i, std::int64_t classes, std::int64_t inner, const T* logp,
                         const std::int64_t* target, const T* weight, std::int64_t ignore_index,
                         T* loss, T* wt, std::int64_t* index) {
  const std::int64_t t = target[i];
  if (t == ignore_index || t < 0 || t >= classes) {
    loss[i] = T(0), wt[i] = T(0), index[i] = 0;
    return t == ignore_index;
  }
  const std::int64_t n = i / inner, j = i % inner;
  const T w = weight ? weight[t] : T(1);
  loss[i] = -w * logp[(n * classes + t) * inner + j];
  wt[i] = w;
  index[i] = t;
  return true;
}

}  // namespace remat::detail
