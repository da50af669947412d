#include "nn/sequential.h"

#include <string>

namespace remat::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules)
    : Module("Sequential") {
  for (const auto& m : modules) append(m);
}

void Sequential::append(std::shared_ptr<Module> module) {
  REMAT_CHECK(module != nullptr, "Sequential: cannot append a null module (at index {})",
              modules_.size());
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& Sequential::operator[](std::size_t index) const {
  REMAT_CHECK(index < modules_.size(), "Sequential: index {} is out of range for {} modules", index,
              modules_.size());
  return modules_[index];
}

void Sequential::wrong_type(std::size_t index) const {
  REMAT_THROW("Sequential: module {} is a {}, not the requested type", index,
              modules_[index]->type_name());
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& m : modules_) x = m->forward(x);
  return x;
}

}  // namespace remat::nn
