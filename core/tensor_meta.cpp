#include "core/tensor_meta.h"

namespace remat {

bool TensorMeta::is_contiguous() const {
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::int64_t TensorMeta::storage_span() const {
  if (numel() == 0) return offset;
  std::int64_t last = offset;
  for (std::size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * strides[i];
  return last + 1;
}

}  // namespace remat
