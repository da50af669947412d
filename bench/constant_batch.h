// A batch as a data loader delivers it: a constant in the pool, not a recomputable random draw
// (a budget must not evict and redraw a benchmark's inputs).
// Usage: const Tensor x = bench::constant_copy(randn({64, 3, 32, 32}, {.seed = 21}));
#pragma once
#include "ops/factory.h"
#include "remat.h"

namespace remat::bench {

inline Tensor constant_copy(const Tensor& t) {
  if (t.dtype() == DType::Int64) return tensor(t.to_vector<std::int64_t>(), t.shape());
  return tensor(t.to_vector<float>(), t.shape());
}

}  // namespace remat::bench
