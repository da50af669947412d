#include "nn/host_dataset.h"

#include <cstring>

#include "ops/view.h"

namespace remat::nn {

HostDataset::Field HostDataset::copy_out(const Tensor& t) {
  Field f;
  f.dtype = t.dtype();
  f.example_shape.assign(t.shape().begin() + 1, t.shape().end());
  f.row_bytes = static_cast<std::size_t>(shape_numel(f.example_shape)) * element_size(f.dtype);
  Tensor c = contiguous(t);
  const std::size_t n = static_cast<std::size_t>(c.numel()) * element_size(f.dtype);
  f.bytes.resize(n);
  if (n > 0) std::memcpy(f.bytes.data(), c.storage()->resident_data(), n);
  return f;
}

HostDataset::HostDataset(const TensorDataset& source)
    : size_(source.size()), inputs_(copy_out(source.inputs())), targets_(copy_out(source.targets())) {}

Tensor HostDataset::gather(const Field& f, std::span<const std::int64_t> indices, bool batched) const {
  Shape shape = f.example_shape;
  if (batched) shape.insert(shape.begin(), static_cast<std::int64_t>(indices.size()));
  return detail::constant_filled(TensorMeta::contiguous(shape, f.dtype, Device::cpu()), [&](void* data) {
    auto* out = static_cast<std::byte*>(data);
    for (std::size_t i = 0; i < indices.size(); ++i)
      std::memcpy(out + i * f.row_bytes, f.bytes.data() + static_cast<std::size_t>(indices[i]) * f.row_bytes,
                  f.row_bytes);
  });
}

Example HostDataset::get(std::int64_t index) const {
  REMAT_CHECK(index >= 0 && index < size_, "HostDataset: index {} out of range for {} examples", index, size_);
  const std::int64_t idx[1] = {index};
  return {gather(inputs_, idx, false), gather(targets_, idx, false)};
}

Batch HostDataset::get_batch(std::span<const std::int64_t> indices) const {
  for (auto i : indices)
    REMAT_CHECK(i >= 0 && i < size_, "HostDataset: index {} out of range for {} examples", i, size_);
  return {gather(inputs_, indices, true), gather(targets_, indices, true)};
}

}  // namespace remat::nn
