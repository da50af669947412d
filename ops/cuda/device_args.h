// Internal: the framework's kernel arguments (TensorMeta + base pointer) as the plain
// Extent / Operand of ops/cuda/launch.h, for the ops' cuda() kernels.
// Usage: cuda_launch::binary(k, scalar_of(dt), extent_of(shape), operand_of(out, shape), ...);
#pragma once
#include "core/error.h"
#include "core/tensor_meta.h"
#include "ops/cpu/loops.h"
#include "ops/cuda/launch.h"

namespace remat::detail {

inline cuda_launch::Scalar scalar_of(DType t) {
  switch (t) {
    case DType::Float32:
      return cuda_launch::Scalar::Float32;
    case DType::Float64:
      return cuda_launch::Scalar::Float64;
    case DType::Int64:
      return cuda_launch::Scalar::Int64;
  }
  REMAT_THROW("unknown dtype");
}

inline cuda_launch::Extent extent_of(const Shape& shape) {
  REMAT_CHECK(static_cast<int>(shape.size()) <= cuda_launch::kMaxDims,
              "CUDA kernels take at most {} dims, got shape {}", cuda_launch::kMaxDims, shape);
  cuda_launch::Extent e;
  e.ndim = static_cast<int>(shape.size());
  for (int d = 0; d < e.ndim; ++d) e.sizes[d] = shape[d];
  return e;
}

// `a` seen over `shape` (broadcast dims get stride 0), at its element offset.
inline cuda_launch::Operand operand_of(const KernelArg& a, const Shape& shape) {
  const Shape s = broadcast_strides(*a.meta, shape);
  cuda_launch::Operand o;
  o.data = a.bytes();
  for (std::size_t d = 0; d < s.size(); ++d) o.strides[d] = s[d];
  return o;
}

// `a` over its own shape, with its own strides, at its element offset.
inline cuda_launch::Operand strided_operand(const KernelArg& a) {
  cuda_launch::Operand o;
  o.data = a.bytes();
  for (std::size_t d = 0; d < a.meta->strides.size(); ++d) o.strides[d] = a.meta->strides[d];
  return o;
}

}  // namespace remat::detail
