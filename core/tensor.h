// The Tensor handle: a cheap, copyable reference to shared state (metadata, a storage cell of
// the DTR pool, autograd metadata).  Copying a handle never copies data; ops live in ops/.
// Usage: Tensor t = remat::randn({2, 3}, {.seed = 1}); float v = t.at<float>({1, 2});
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/storage.h"
#include "core/tensor_meta.h"

namespace remat {

class Tensor;

// The slot core/ keeps for autograd; autograd/ fills it with its own metadata type.
class AutogradMetaInterface {
 public:
  virtual ~AutogradMetaInterface() = default;
  virtual const Tensor& grad() const = 0;
  virtual void set_grad(Tensor grad) = 0;
  virtual bool requires_grad() const = 0;
  virtual void set_requires_grad(bool value, const Tensor& self) = 0;
  virtual bool is_leaf() const = 0;
};

struct TensorImpl {
  TensorMeta meta;
  std::shared_ptr<Storage> storage;
  std::shared_ptr<AutogradMetaInterface> autograd;
  std::string name;  // optional, for traces and error messages
};

// Installed by autograd/ so core can create autograd metadata on set_requires_grad.
using AutogradMetaFactory = std::shared_ptr<AutogradMetaInterface> (*)();
void set_autograd_meta_factory(AutogradMetaFactory factory);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const TensorMeta& meta() const { return checked().meta; }
  const Shape& shape() const { return meta().shape; }
  const Shape& strides() const { return meta().strides; }
  std::int64_t offset() const { return meta().offset; }
  DType dtype() const { return meta().dtype; }
  Device device() const { return meta().device; }
  std::int64_t dim() const { return meta().dim(); }
  std::int64_t numel() const { return meta().numel(); }
  std::int64_t size(std::int64_t d) const;
  std::int64_t stride(std::int64_t d) const;
  bool is_contiguous() const { return meta().is_contiguous(); }
  const std::shared_ptr<Storage>& storage() const { return checked().storage; }
  // True when both handles view the same storage cell.
  bool shares_storage_with(const Tensor& other) const;

  // Autograd metadata (filled by autograd/).
  bool requires_grad() const;
  Tensor& set_requires_grad(bool value = true);
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(Tensor g) const;
  AutogradMetaInterface* autograd_meta() const { return checked().autograd.get(); }

  // Element access; reads through the storage, making it resident when needed.
  template <class T>
  T item() const;
  template <class T>
  T at(std::initializer_list<std::int64_t> index) const;
  template <class T>
  void set(std::initializer_list<std::int64_t> index, T value) const;
  // Contiguous tensors only: a pointer to the first element, valid until the next op call.
  template <class T>
  T* data_ptr() const;
  // All elements in row-major order, converted to T.
  template <class T>
  std::vector<T> to_vector() const;

  std::string str() const;  // PyTorch-style printing, summarised when large
  std::string shape_str() const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  friend bool same(const Tensor& a, const Tensor& b) { return a.impl_ == b.impl_; }

 private:
  const TensorImpl& checked() const {
    if (!impl_) throw Error("operation on an undefined tensor");
    return *impl_;
  }
  std::int64_t element_offset(std::string_view op, std::initializer_list<std::int64_t> index) const;
  void* base_data() const;
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace remat

template <>
struct fmt::formatter<remat::Tensor> : fmt::formatter<std::string> {
  auto format(const remat::Tensor& t, fmt::format_context& ctx) const {
    return fmt::formatter<std::string>::format(t.str(), ctx);
  }
};
