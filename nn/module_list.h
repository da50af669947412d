// An indexed list of submodules, registered as "0", "1", ... so parameters read "0.weight",
// "layers.3.linear1.bias" as in PyTorch; nothing is called on them in any order (Sequential,
// which chains them, derives from it).
// Usage: auto layers = std::make_shared<nn::ModuleList>();
//        layers->push_back(std::make_shared<nn::Linear>(8, 8));
//        for (const auto& m : *layers) x = m->forward(x);
#pragma once
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace remat::nn {

class ModuleList : public Module {
 public:
  explicit ModuleList(std::string type_name = "ModuleList") : Module(std::move(type_name)) {}
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules,
             std::string type_name = "ModuleList");

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

 protected:
  void append(std::shared_ptr<Module> module);

 private:
  [[noreturn]] void wrong_type(std::size_t index) const;
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace remat::nn
