// What a tensor is without its data: shape, strides, offset (in elements), dtype, device.
// Shape rules produce these; kernels receive them beside raw resident pointers.
#pragma once
#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace remat {

struct TensorMeta {
  Shape shape;
  Shape strides;
  std::int64_t offset = 0;
  DType dtype = DType::Float32;
  Device device = Device::cpu();

  static TensorMeta contiguous(Shape shape, DType dtype, Device device) {
    TensorMeta m;
    m.strides = contiguous_strides(shape);
    m.shape = std::move(shape);
    m.dtype = dtype;
    m.device = device;
    return m;
  }
  std::int64_t dim() const { return static_cast<std::int64_t>(shape.size()); }
  std::int64_t numel() const { return shape_numel(shape); }
  bool is_contiguous() const;
  // Bytes of a contiguous buffer holding numel() elements.
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(dtype); }
  // Elements spanned from offset 0 to the last element reachable through the strides.
  std::int64_t storage_span() const;
};

// A tensor as a kernel sees it: metadata and the base pointer of its resident buffer.
// Kernels never see cells, budgets or autograd.
struct KernelArg {
  const TensorMeta* meta = nullptr;
  void* base = nullptr;

  template <class T>
  T* data() const {
    return static_cast<T*>(base) + meta->offset;
  }
  // The first element's address whatever the dtype (device kernels and copies).
  char* bytes() const {
    return static_cast<char*>(base) +
           meta->offset * static_cast<std::int64_t>(element_size(meta->dtype));
  }
};

}  // namespace remat
