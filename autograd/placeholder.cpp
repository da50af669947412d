#include "autograd/placeholder.h"

namespace remat::detail {

void* PlaceholderStorage::resident_data() {
  REMAT_THROW("reading a placeholder: it stands for {}; it has no data", what_);
}

Tensor make_placeholder(const TensorMeta& meta, std::size_t nbytes, std::string what) {
  auto impl = std::make_shared<TensorImpl>();
  impl->meta = meta;
  impl->storage = std::make_shared<PlaceholderStorage>(meta.device, nbytes, std::move(what));
  return Tensor(std::move(impl));
}

void throw_placeholder_input(std::string_view op, std::size_t i, const Tensor& t) {
  const auto* p = dynamic_cast<const PlaceholderStorage*>(t.storage().get());
  REMAT_THROW("{}: input {} (shape {}) is a placeholder with no data: it stands for {}", op, i,
              t.shape(), p ? p->what() : std::string("a tensor outside the pool"));
}

}  // namespace remat::detail
