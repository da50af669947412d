// A dataset held in host memory outside the device pool, as a GPU framework keeps its data on
// the host and copies each batch to the device: the data does not count against the memory
// budget, and each batch enters the pool as a constant tensor with one copy.
// Usage: HostDataset train(load_fashion_mnist(dir, Split::Train));  DataLoader loader(train, ...);
#pragma once
#include <cstddef>
#include <vector>

#include "nn/data.h"

namespace remat::nn {

class HostDataset : public Dataset {
 public:
  // Copies the examples of `source` (rows of its tensors) into host memory.
  explicit HostDataset(const TensorDataset& source);
  std::int64_t size() const override { return size_; }
  Example get(std::int64_t index) const override;
  Batch get_batch(std::span<const std::int64_t> indices) const override;

 private:
  struct Field {
    std::vector<std::byte> bytes;
    Shape example_shape;
    DType dtype = DType::Float32;
    std::size_t row_bytes = 0;
  };
  static Field copy_out(const Tensor& t);
  Tensor gather(const Field& f, std::span<const std::int64_t> indices, bool batched) const;
  std::int64_t size_ = 0;
  Field inputs_, targets_;
};

}  // namespace remat::nn
