#include "core/tensor.h"

#include <atomic>

#include "core/cuda.h"

namespace remat {

namespace {
std::atomic<AutogradMetaFactory> g_autograd_factory{nullptr};
}

void set_autograd_meta_factory(AutogradMetaFactory factory) {
  g_autograd_factory = factory;
}

std::int64_t Tensor::size(std::int64_t d) const {
  return shape()[wrap_dim("size", d, dim())];
}
std::int64_t Tensor::stride(std::int64_t d) const {
  return strides()[wrap_dim("stride", d, dim())];
}

bool Tensor::shares_storage_with(const Tensor& other) const {
  return defined() && other.defined() && impl_->storage == other.impl_->storage;
}

bool Tensor::requires_grad() const {
  auto* a = checked().autograd.get();
  return a && a->requires_grad();
}

Tensor& Tensor::set_requires_grad(bool value) {
  auto& impl = const_cast<TensorImpl&>(checked());
  REMAT_CHECK(!value || is_floating(impl.meta.dtype),
              "set_requires_grad: only floating-point tensors can require gradients, got {}",
              impl.meta.dtype);
  if (!impl.autograd) {
    if (!value) return *this;
    auto factory = g_autograd_factory.load();
    REMAT_CHECK(factory, "set_requires_grad: the autograd layer is not linked");
    impl.autograd = factory();
  }
  impl.autograd->set_requires_grad(value, *this);
  return *this;
}

bool Tensor::is_leaf() const {
  auto* a = checked().autograd.get();
  return !a || a->is_leaf();
}

Tensor Tensor::grad() const {
  auto* a = checked().autograd.get();
  return a ? a->grad() : Tensor();
}

void Tensor::set_grad(Tensor g) const {
  auto& impl = const_cast<TensorImpl&>(checked());
  if (!impl.autograd) {
    auto factory = g_autograd_factory.load();
    REMAT_CHECK(factory, "set_grad: the autograd layer is not linked");
    impl.autograd = factory();
  }
  impl.autograd->set_grad(std::move(g));
}

std::string Tensor::shape_str() const {
  return fmt::format("{}", shape());
}

std::int64_t Tensor::element_offset(std::string_view op,
                                    std::initializer_list<std::int64_t> index) const {
  REMAT_CHECK(static_cast<std::int64_t>(index.size()) == dim(),
              "{}: got {} indices for a tensor of shape {}", op, index.size(), shape());
  std::int64_t off = offset();
  std::size_t i = 0;
  for (auto idx : index) {
    const std::int64_t n = shape()[i];
    REMAT_CHECK(idx >= -n && idx < n, "{}: index {} out of range for dim {} of shape {}", op, idx,
                i, shape());
    off += (idx < 0 ? idx + n : idx) * strides()[i];
    ++i;
  }
  return off;
}

void* Tensor::base_data() const {
  const auto& s = storage();
  REMAT_CHECK(s, "tensor has no storage");
  REMAT_CHECK(device().is_cpu(),
              "element writes and data_ptr need a CPU tensor, got one on {} (copy it with to())",
              device());
  return s->resident_data();
}

namespace {
// The storage's bytes where the host can read them: the buffer itself on the CPU, a copy of a
// device buffer otherwise (element reads and printing of CUDA tensors).
class HostBytes {
 public:
  explicit HostBytes(const Tensor& t) {
    const auto& s = t.storage();
    REMAT_CHECK(s, "tensor has no storage");
    void* data = s->resident_data();
    if (t.device().is_cpu()) {
      data_ = data;
      return;
    }
    copy_.resize(s->nbytes());
    if (!copy_.empty()) detail::cuda_memory::copy_to_host(copy_.data(), data, copy_.size());
    data_ = copy_.data();
  }
  const void* data() const { return data_; }

 private:
  std::vector<char> copy_;
  const void* data_ = nullptr;
};

template <class T>
T read_as(const void* base, DType dtype, std::int64_t off) {
  switch (dtype) {
    case DType::Float32:
      return static_cast<T>(static_cast<const float*>(base)[off]);
    case DType::Float64:
      return static_cast<T>(static_cast<const double*>(base)[off]);
    case DType::Int64:
      return static_cast<T>(static_cast<const std::int64_t*>(base)[off]);
  }
  return T{};
}

// One element, copied alone from a device buffer (not the whole storage).
template <class T>
T read_element(const Tensor& t, std::int64_t off) {
  const auto& s = t.storage();
  REMAT_CHECK(s, "tensor has no storage");
  const void* data = s->resident_data();
  if (t.device().is_cpu()) return read_as<T>(data, t.dtype(), off);
  alignas(8) unsigned char element[8];
  const std::size_t size = element_size(t.dtype());
  detail::cuda_memory::copy_to_host(element, static_cast<const unsigned char*>(data) + off * size,
                                    size);
  return read_as<T>(element, t.dtype(), 0);
}
}  // namespace

template <class T>
T Tensor::item() const {
  REMAT_CHECK(numel() == 1, "item: expected a tensor with one element, got shape {}", shape());
  return read_element<T>(*this, offset());
}

template <class T>
T Tensor::at(std::initializer_list<std::int64_t> index) const {
  return read_element<T>(*this, element_offset("at", index));
}

template <class T>
void Tensor::set(std::initializer_list<std::int64_t> index, T value) const {
  REMAT_CHECK(dtype_of<T>() == dtype(), "set: value type {} does not match tensor dtype {}",
              dtype_of<T>(), dtype());
  const auto off = element_offset("set", index);
  base_data();  // resident first, then the cache detaches the old value, then we write
  storage()->mark_mutated();
  void* base = base_data();
  static_cast<T*>(base)[off] = value;
}

template <class T>
T* Tensor::data_ptr() const {
  REMAT_CHECK(dtype_of<T>() == dtype(), "data_ptr: requested {} but the tensor holds {}",
              dtype_of<T>(), dtype());
  REMAT_CHECK(is_contiguous(), "data_ptr: tensor of shape {} strides {} is not contiguous", shape(),
              strides());
  return static_cast<T*>(base_data()) + offset();
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const auto& m = meta();
  std::vector<T> out(static_cast<std::size_t>(m.numel()));
  if (out.empty()) return out;
  const HostBytes bytes(*this);
  const void* base = bytes.data();
  std::vector<std::int64_t> idx(m.shape.size(), 0);
  for (std::size_t n = 0; n < out.size(); ++n) {
    std::int64_t off = m.offset;
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * m.strides[d];
    out[n] = read_as<T>(base, m.dtype, off);
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < m.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

#define REMAT_INSTANTIATE(T)                                                  \
  template T Tensor::item<T>() const;                                         \
  template T Tensor::at<T>(std::initializer_list<std::int64_t>) const;        \
  template void Tensor::set<T>(std::initializer_list<std::int64_t>, T) const; \
  template T* Tensor::data_ptr<T>() const;                                    \
  template std::vector<T> Tensor::to_vector<T>() const;
REMAT_INSTANTIATE(float)
REMAT_INSTANTIATE(double)
REMAT_INSTANTIATE(std::int64_t)
#undef REMAT_INSTANTIATE

}  // namespace remat
