// Placeholders: what a checkpoint's replay returns for an output of a skipped SAVE region that
// nobody kept.  Same metadata as the original, a storage with no data: views work, and any read
// (a kernel, item(), printing) throws an error that says which value it stands for.
// Usage: Tensor p = detail::make_placeholder(meta, nbytes, "output 0 of SAVE region 'conv' ...");
#pragma once
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace remat::detail {

class PlaceholderStorage final : public Storage {
 public:
  PlaceholderStorage(Device device, std::size_t nbytes, std::string what)
      : device_(device), nbytes_(nbytes), what_(std::move(what)) {}
  Device device() const override { return device_; }
  std::size_t nbytes() const override { return nbytes_; }
  void* resident_data() override;
  bool is_placeholder() const override { return true; }
  const std::string& what() const { return what_; }

 private:
  Device device_;
  std::size_t nbytes_;
  std::string what_;
};

Tensor make_placeholder(const TensorMeta& meta, std::size_t nbytes, std::string what);
// The error for a kernel about to read placeholder input i.
[[noreturn]] void throw_placeholder_input(std::string_view op, std::size_t i, const Tensor& t);

}  // namespace remat::detail
