// A chain of modules, each fed the previous one's output; children are named "0", "1", ...
// so parameters read "0.weight", "2.bias" as in PyTorch.
// Usage: auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(784, 128),
//                                                   std::make_shared<nn::ReLU>());
//        net->push_back(std::make_shared<nn::Linear>(128, 10));  auto y = net->forward(x);
#pragma once
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <vector>

#include "nn/module.h"

namespace remat::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  // Variadic, so std::make_shared<Sequential>(a, b, c) works (Modules cannot be copied).
  template <class... M>
  requires(sizeof...(M) > 0) explicit Sequential(std::shared_ptr<M>... modules)
      : Module("Sequential") {
    (append(std::move(modules)), ...);
  }

  // Appends a module (registered as child str(size())) and returns it with its own type.
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    append(module);
    return module;
  }

  std::size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  // Bounds-checked.
  const std::shared_ptr<Module>& operator[](std::size_t index) const;
  // The module at `index` as its concrete type; an error when it is another type.
  template <class M>
  std::shared_ptr<M> at(std::size_t index) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[index]);
    if (!m) wrong_type(index);
    return m;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

  // Applies every module in order; an empty Sequential returns its input.
  Tensor forward(const Tensor& input) override;

 private:
  void append(std::shared_ptr<Module> module);
  [[noreturn]] void wrong_type(std::size_t index) const;
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace remat::nn
