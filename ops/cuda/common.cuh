// Internal: what the CUDA kernels share (ops/cuda/*.cu only): launch sizes, the error check
// after a launch, an extent's element offsets in strided operands, and the host-side dispatch
// over scalar types.  Grid-stride loops; 256 threads a block.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "ops/cuda/launch.h"

namespace remat::detail::cuda_launch {

constexpr int kThreads = 256;

inline void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA kernel ") + what + ": " + cudaGetErrorString(err));
}

inline int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 32 ? (b > 0 ? b : 1) : 65535 * 32);
}

// Offsets of element `i` of the extent in `count` operands.
struct Index {
  int ndim;
  std::int64_t sizes[kMaxDims];
  __device__ void offsets(std::int64_t i, const std::int64_t* const* strides, int count,
                          std::int64_t* off) const {
    for (int k = 0; k < count; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const std::int64_t idx = i % sizes[d];
      i /= sizes[d];
      for (int k = 0; k < count; ++k) off[k] += idx * strides[k][d];
    }
  }
};

inline Index index_of(const Extent& e) {
  Index ix{e.ndim, {}};
  for (int d = 0; d < e.ndim; ++d) ix.sizes[d] = e.sizes[d];
  return ix;
}

struct Strides {
  std::int64_t s[kMaxDims];
};
inline Strides strides_of(const Operand& o) {
  Strides s{};
  for (int d = 0; d < kMaxDims; ++d) s.s[d] = o.strides[d];
  return s;
}

template <class F>
inline void visit(Scalar t, F&& f) {
  switch (t) {
    case Scalar::Float32:
      f(float{});
      return;
    case Scalar::Float64:
      f(double{});
      return;
    case Scalar::Int64:
      f(std::int64_t{});
      return;
  }
}

// Float32 and float64 only, for kernels that have no integer form (callers check dtypes first).
template <class F>
inline void visit_floating(Scalar t, F&& f) {
  if (t == Scalar::Float64)
    f(double{});
  else
    f(float{});
}

// Grid-stride loops: for (i = first_index(); i < n; i += index_step()).
__device__ inline std::int64_t first_index() {
  return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
}
__device__ inline std::int64_t index_step() {
  return static_cast<std::int64_t>(blockDim.x) * gridDim.x;
}

}  // namespace remat::detail::cuda_launch
