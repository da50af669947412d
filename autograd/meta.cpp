#include "autograd/meta.h"

#include "core/recycling_allocator.h"

namespace remat {
namespace {
// Every output that carries history gets one: from a per-thread free list, not malloc.
std::shared_ptr<AutogradMeta> new_meta() {
  return std::allocate_shared<AutogradMeta>(RecyclingAllocator<AutogradMeta>());
}
std::shared_ptr<AutogradMetaInterface> make_meta() {
  return new_meta();
}
// core/ asks for autograd metadata through this factory when a tensor first requires grad.
const bool g_registered = (set_autograd_meta_factory(&make_meta), true);

AutogradMeta* meta_of(const Tensor& t) {
  return static_cast<AutogradMeta*>(t.autograd_meta());
}
AutogradMeta& ensure_meta(const Tensor& t) {
  auto& slot = t.impl()->autograd;
  if (!slot) slot = new_meta();
  return static_cast<AutogradMeta&>(*slot);
}
}  // namespace

void AutogradMeta::set_requires_grad(bool value, const Tensor& self) {
  REMAT_CHECK(grad_fn_ == nullptr,
              "set_requires_grad: tensor of shape {} is not a leaf (it was computed by {}); "
              "use detach() to make a leaf",
              self.shape(), grad_fn_ ? grad_fn_->name() : "");
  requires_grad_ = value;
}

Edge gradient_edge(const Tensor& t) {
  (void)g_registered;
  auto* m = meta_of(t);
  if (!m) return {};
  if (m->grad_fn_) return {m->grad_fn_, m->output_nr_};
  if (!m->requires_grad_) return {};
  auto acc = m->grad_accumulator_.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m->grad_accumulator_ = acc;
  }
  return {acc, 0};
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& node, std::uint32_t output_nr) {
  auto& m = ensure_meta(t);
  m.grad_fn_ = node;
  m.output_nr_ = output_nr;
}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  auto* m = meta_of(t);
  return m ? m->grad_fn_ : nullptr;
}

Tensor alias_without_history(const Tensor& t) {
  if (!t.defined()) return t;
  auto impl = std::make_shared<TensorImpl>();
  impl->meta = t.meta();
  impl->storage = t.storage();
  return Tensor(std::move(impl));
}

}  // namespace remat
