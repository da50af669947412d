// The Module base of the nn API, in the style of PyTorch's C++ frontend: named, registered
// parameters, buffers and submodules; parameters(), named_parameters(), buffers(), children(),
// train()/eval(), zero_grad(); and functional_call, which runs a module with substituted
// parameters (needed for unrolled optimisation such as Unrolled GAN).
// Usage:
//   struct Net : nn::Module {
//     Net() { fc = register_module("fc", std::make_shared<nn::Linear>(784, 10)); }
//     Tensor forward(const Tensor& x) override { return fc->forward(x); }
//     std::shared_ptr<nn::Linear> fc;
//   };
#pragma once
#include <concepts>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace remat::nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // One tensor in, one tensor out: what Sequential chains.  Modules with other signatures
  // add their own methods and leave this throwing.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  const std::string& type_name() const { return type_name_; }

  // ---- registration (call from constructors); names are unique within a module
  // Registers a parameter: it becomes a leaf that requires grad (unless requires_grad=false).
  Tensor register_parameter(std::string name, Tensor value, bool requires_grad = true);
  // Registers a buffer (running statistics and other state saved with the model, no gradient).
  Tensor register_buffer(std::string name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }

  // ---- access.  Layers read their parameters through param()/buffer() inside forward, so
  // functional_call can substitute them.
  Tensor param(const std::string& name) const;
  Tensor buffer(const std::string& name) const;
  // Replaces a registered buffer's handle (e.g. a buffer recomputed out of place).
  void set_buffer(const std::string& name, Tensor value);
  // Replaces a registered parameter's value (shape and dtype must match); used by loading.
  void set_parameter(const std::string& name, Tensor value);

  std::vector<Tensor> parameters(bool recurse = true) const;
  // Dotted names, as PyTorch: "layer1.0.conv1.weight", in registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // This module and every descendant, depth first, with dotted names ("" for this one).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();

  void train(bool on = true);  // recursive
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Drops every parameter's gradient (as PyTorch's set_to_none=True).
  void zero_grad();
  // Moves every parameter and buffer, recursively, to `device` (as PyTorch's module.to):
  // parameters stay leaves with their requires_grad; gradients are dropped.  Call it before
  // making the optimizer: handles taken earlier keep the old tensors.
  Module& to(Device device);

  // Parameters and buffers by dotted name: what serialization saves.
  std::map<std::string, Tensor> state_dict() const;

 protected:
  void add_child(std::string name, std::shared_ptr<Module> module);

 private:
  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// While it lives, the module's named parameters (dotted names, a subset of named_parameters())
// read as the given tensors, which may carry autograd history, on this thread.  Checks every
// name, shape, dtype and device first.  Scopes nest: the innermost substitution wins.
class ParameterSubstitution {
 public:
  ParameterSubstitution(Module& module, const std::map<std::string, Tensor>& parameters);
  ~ParameterSubstitution();
  ParameterSubstitution(const ParameterSubstitution&) = delete;
  ParameterSubstitution& operator=(const ParameterSubstitution&) = delete;

 private:
  struct Frame;
  std::unique_ptr<Frame> frame_;
};

// Runs module.forward(input) with the named parameters replaced by the given tensors: the
// result is differentiable with respect to them.  The module itself is left unchanged.
Tensor functional_call(Module& module, const std::map<std::string, Tensor>& parameters,
                       const Tensor& input);

// The same for any callable and any inputs and outputs: fn(args...) runs with the parameters
// substituted, e.g. a forward with two inputs, or a whole loss.
//   Tensor loss = functional_call(d, weights, [&](const Tensor& a, const Tensor& b) {
//     return add(d.forward(a), d.forward(b)); }, real, fake);
template <class Fn, class... Args>
requires std::invocable<Fn, Args...>
decltype(auto) functional_call(Module& module, const std::map<std::string, Tensor>& parameters,
                               Fn&& fn, Args&&... args) {
  ParameterSubstitution scope(module, parameters);
  return std::invoke(std::forward<Fn>(fn), std::forward<Args>(args)...);
}

}  // namespace remat::nn
