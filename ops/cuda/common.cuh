// Internal: what the CUDA kernels share (ops/cuda/*.cu only): launch sizes, the error check
// after a launch, an extent's element offsets in strided operands, and the host-side dispatch
// over scalar types.  Grid-stride loops; 256 threads a block.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
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

// Offsets of element `i` of the extent in N operands.  The loops unroll over every dim, so the
// sizes and strides stay in registers: with a loop bound of ndim they were copied to local
// memory for every element, and element-wise kernels ran 20x slower than memory.  The outermost
// dim needs no division, and extents under 2^32 elements divide in 32 bits (64-bit division is
// a long software sequence on the GPU).
struct Strides {
  std::int64_t s[kMaxDims];
};
struct Index {
  int ndim;
  bool narrow;  // numel < 2^32: 32-bit division
  std::int64_t sizes[kMaxDims];
  template <int N>
  __device__ void offsets(std::int64_t i, const Strides (&st)[N], std::int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
#pragma unroll
    for (int d = kMaxDims - 1; d > 0; --d) {
      if (d >= ndim) continue;
      std::int64_t idx;
      if (narrow) {
        const std::uint32_t j = static_cast<std::uint32_t>(i);
        const std::uint32_t size = static_cast<std::uint32_t>(sizes[d]), q = j / size;
        idx = j - q * size;
        i = q;
      } else {
        idx = i % sizes[d];
        i /= sizes[d];
      }
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += idx * st[k].s[d];
    }
    if (ndim > 0) {
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += i * st[k].s[0];
    }
  }
};

inline Index index_of(const Extent& e) {
  Index ix{e.ndim, e.numel() < (std::int64_t{1} << 32), {}};
  for (int d = 0; d < e.ndim; ++d) ix.sizes[d] = e.sizes[d];
  return ix;
}

// Merges neighbouring dims that every operand walks as one (stride[d] == stride[d + 1] *
// size[d + 1]) and drops dims of size 1, so contiguous operands take one dim and no division.
inline void coalesce(Extent& e, std::initializer_list<Operand*> operands) {
  constexpr int kMaxOperands = 4;
  const Operand* ops[kMaxOperands] = {};
  std::int64_t strides[kMaxOperands][kMaxDims] = {};
  int count = 0;
  for (Operand* o : operands)
    if (count < kMaxOperands) ops[count++] = o;
  Extent out;
  for (int d = 0; d < e.ndim; ++d) {
    if (e.sizes[d] == 1) continue;
    const int last = out.ndim - 1;
    bool joins = last >= 0;
    for (int k = 0; k < count && joins; ++k)
      joins = strides[k][last] == ops[k]->strides[d] * e.sizes[d];
    if (joins) {
      out.sizes[last] *= e.sizes[d];
      for (int k = 0; k < count; ++k) strides[k][last] = ops[k]->strides[d];
    } else {
      for (int k = 0; k < count; ++k) strides[k][out.ndim] = ops[k]->strides[d];
      out.sizes[out.ndim++] = e.sizes[d];
    }
  }
  e = out;
  int k = 0;
  for (Operand* o : operands)
    if (k < count) {
      for (int d = 0; d < kMaxDims; ++d) o->strides[d] = strides[k][d];
      ++k;
    }
}

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
