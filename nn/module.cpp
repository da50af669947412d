#include "nn/module.h"

#include <algorithm>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "ops/device_copy.h"
#include "ops/inplace.h"
#include "ops/view.h"

namespace remat::nn {
namespace {

// functional_call's substitutes, innermost call last.  param() consults them before the
// module's own tensors; thread-local so concurrent forwards on other threads are unaffected.
using OverrideFrame = std::map<const Module*, std::map<std::string, Tensor, std::less<>>>;
thread_local std::vector<const OverrideFrame*> t_overrides;

const Tensor* find_override(const Module* m, const std::string& name) {
  for (auto it = t_overrides.rbegin(); it != t_overrides.rend(); ++it) {
    auto mod = (*it)->find(m);
    if (mod == (*it)->end()) continue;
    auto p = mod->second.find(name);
    if (p != mod->second.end()) return &p->second;
  }
  return nullptr;
}

template <class T>
using Entries = std::vector<std::pair<std::string, T>>;

template <class T>
const T* find_named(const std::vector<std::pair<std::string, T>>& entries,
                    const std::string& name) {
  for (const auto& [n, v] : entries)
    if (n == name) return &v;
  return nullptr;
}

template <class T>
std::string list_names(const std::vector<std::pair<std::string, T>>& entries) {
  if (entries.empty()) return "none";
  std::string out;
  for (const auto& [n, v] : entries) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

void check_new_name(const std::string& type_name, const Entries<Tensor>& params,
                    const Entries<Tensor>& buffers,
                    const Entries<std::shared_ptr<Module>>& children, const char* what,
                    const std::string& name) {
  REMAT_CHECK(!name.empty(), "{}: {} name must not be empty", type_name, what);
  REMAT_CHECK(name.find('.') == std::string::npos,
              "{}: {} name '{}' must not contain '.' (dots separate submodule names)", type_name,
              what, name);
  const char* taken = find_named(params, name)     ? "parameter"
                      : find_named(buffers, name)  ? "buffer"
                      : find_named(children, name) ? "submodule"
                                                   : nullptr;
  REMAT_CHECK(taken == nullptr, "{}: cannot register {} '{}': a {} of that name already exists",
              type_name, what, name, taken ? taken : "");
}

// Own entries first, then each child's, depth first, as PyTorch's _named_members.  With
// `dedupe`, a tensor reachable under several names (a shared submodule, tied weights) is listed
// once, under its first name, so an optimizer does not step it twice.
void collect(const Module& m, bool buffers, bool dedupe, const std::string& prefix,
             Entries<Tensor>& out, std::unordered_set<const void*>& seen) {
  for (auto& [n, t] : buffers ? m.named_buffers(false) : m.named_parameters(false))
    if (!dedupe || seen.insert(t.impl()).second) out.emplace_back(join(prefix, n), t);
  for (const auto& [n, c] : m.named_children())
    collect(*c, buffers, dedupe, join(prefix, n), out, seen);
}

}  // namespace

Tensor Module::forward(const Tensor&) {
  REMAT_THROW("{}: this module has no one-tensor forward(); call its own forward method",
              type_name_);
}

Tensor Module::register_parameter(std::string name, Tensor value, bool requires_grad) {
  check_new_name(type_name_, params_, buffers_, children_, "parameter", name);
  REMAT_CHECK(value.defined(), "{}: parameter '{}' is an undefined tensor", type_name_, name);
  REMAT_CHECK(!requires_grad || is_floating(value.dtype()),
              "{}: parameter '{}' must be floating-point to require grad, got {}", type_name_, name,
              value.dtype());
  // A parameter is a leaf of its own: whatever history the given tensor had is dropped.
  Tensor p = detach(value);
  p.set_requires_grad(requires_grad);
  p.storage()->set_role(StorageRole::Parameter);
  params_.emplace_back(std::move(name), p);
  return p;
}

Tensor Module::register_buffer(std::string name, Tensor value) {
  check_new_name(type_name_, params_, buffers_, children_, "buffer", name);
  REMAT_CHECK(value.defined(), "{}: buffer '{}' is an undefined tensor", type_name_, name);
  Tensor b = detach(value);
  buffers_.emplace_back(std::move(name), b);
  return b;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_new_name(type_name_, params_, buffers_, children_, "submodule", name);
  REMAT_CHECK(module != nullptr, "{}: submodule '{}' is null", type_name_, name);
  REMAT_CHECK(module.get() != this, "{}: cannot register a module as its own submodule ('{}')",
              type_name_, name);
  children_.emplace_back(std::move(name), std::move(module));
}

Tensor Module::param(const std::string& name) const {
  if (!t_overrides.empty())
    if (const Tensor* t = find_override(this, name)) return *t;
  const Tensor* p = find_named(params_, name);
  REMAT_CHECK(p != nullptr, "{} has no parameter '{}' (its parameters: {})", type_name_, name,
              list_names(params_));
  return *p;
}

Tensor Module::buffer(const std::string& name) const {
  const Tensor* b = find_named(buffers_, name);
  REMAT_CHECK(b != nullptr, "{} has no buffer '{}' (its buffers: {})", type_name_, name,
              list_names(buffers_));
  return *b;
}

void Module::set_buffer(const std::string& name, Tensor value) {
  for (auto& [n, b] : buffers_) {
    if (n != name) continue;
    REMAT_CHECK(value.defined(), "{}: set_buffer('{}'): undefined tensor", type_name_, name);
    b = detach(value);
    return;
  }
  REMAT_THROW("{} has no buffer '{}' (its buffers: {})", type_name_, name, list_names(buffers_));
}

void Module::set_parameter(const std::string& name, Tensor value) {
  for (auto& [n, p] : params_) {
    if (n != name) continue;
    REMAT_CHECK(value.defined(), "{}: set_parameter('{}'): undefined tensor", type_name_, name);
    REMAT_CHECK(
        value.shape() == p.shape() && value.dtype() == p.dtype(),
        "{}: set_parameter('{}'): expected shape {} and dtype {}, got shape {} and dtype {}",
        type_name_, name, p.shape(), p.dtype(), value.shape(), value.dtype());
    // In place, so every handle already given out (an optimizer's) sees the new value.
    NoGradGuard no_grad;
    copy_(p, value);
    return;
  }
  REMAT_THROW("{} has no parameter '{}' (its parameters: {})", type_name_, name,
              list_names(params_));
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  if (!recurse) return params_;
  Entries<Tensor> out;
  std::unordered_set<const void*> seen;
  collect(*this, false, true, "", out, seen);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  if (!recurse) return buffers_;
  Entries<Tensor> out;
  std::unordered_set<const void*> seen;
  collect(*this, true, true, "", out, seen);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, c] : children_) out.push_back(c);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  // A module not owned by a shared_ptr (one on the stack) is listed through a non-owning
  // handle: valid as long as the module itself.
  std::shared_ptr<Module> self = weak_from_this().lock();
  if (!self) self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out{{"", self}};
  std::unordered_set<const Module*> seen{this};
  // Depth first with an explicit stack, children in registration order.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> stack;
  auto push_children = [&](const std::string& prefix, const Module& m) {
    for (auto it = m.children_.rbegin(); it != m.children_.rend(); ++it)
      stack.emplace_back(join(prefix, it->first), it->second);
  };
  push_children("", *this);
  while (!stack.empty()) {
    auto [name, m] = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(m.get()).second) continue;
    out.emplace_back(name, m);
    push_children(name, *m);
  }
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad() {
  for (auto& p : parameters())
    if (p.grad().defined()) p.set_grad(Tensor());
}

Module& Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto& [name, p] : params_) {
    if (p.device() == device) continue;
    Tensor moved = detach(remat::to(p, device));
    moved.set_requires_grad(p.requires_grad());
    moved.storage()->set_role(StorageRole::Parameter);
    p = moved;
  }
  for (auto& [name, b] : buffers_)
    if (b.device() != device) b = detach(remat::to(b, device));
  for (auto& [name, child] : children_) child->to(device);
  return *this;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> entries;
  std::unordered_set<const void*> seen;
  collect(*this, false, false, "", entries, seen);
  collect(*this, true, false, "", entries, seen);
  std::map<std::string, Tensor> out;
  for (auto& [n, t] : entries) out.emplace(n, t);
  return out;
}

struct ParameterSubstitution::Frame {
  OverrideFrame overrides;
};

ParameterSubstitution::ParameterSubstitution(Module& module,
                                             const std::map<std::string, Tensor>& parameters)
    : frame_(std::make_unique<Frame>()) {
  struct Slot {
    const Module* owner;
    std::string local;
    Tensor current;
  };
  std::map<std::string, Slot> slots;
  std::string known;  // in registration order, for the error message
  for (auto& [prefix, m] : module.named_modules())
    for (auto& [local, t] : m->named_parameters(false)) {
      const std::string name = join(prefix, local);
      if (slots.emplace(name, Slot{m.get(), local, t}).second)
        known += (known.empty() ? "" : ", ") + name;
    }

  for (const auto& [name, value] : parameters) {
    auto it = slots.find(name);
    if (it == slots.end()) {
      REMAT_THROW("functional_call: {} has no parameter '{}' (its parameters: {})",
                  module.type_name(), name, known.empty() ? "none" : known);
    }
    const Tensor& cur = it->second.current;
    REMAT_CHECK(value.defined(), "functional_call: the substitute for '{}' is undefined", name);
    REMAT_CHECK(value.shape() == cur.shape() && value.dtype() == cur.dtype() &&
                    value.device() == cur.device(),
                "functional_call: parameter '{}' has shape {} and dtype {}, but its substitute "
                "has shape {} and dtype {}",
                name, cur.shape(), cur.dtype(), value.shape(), value.dtype());
    frame_->overrides[it->second.owner][it->second.local] = value;
  }
  t_overrides.push_back(&frame_->overrides);
}

ParameterSubstitution::~ParameterSubstitution() {
  t_overrides.pop_back();
}

Tensor functional_call(Module& module, const std::map<std::string, Tensor>& parameters,
                       const Tensor& input) {
  ParameterSubstitution scope(module, parameters);
  return module.forward(input);
}

}  // namespace remat::nn
