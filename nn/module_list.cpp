#include "nn/module_list.h"

namespace remat::nn {

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules,
                       std::string type_name)
    : Module(std::move(type_name)) {
  for (const auto& m : modules) append(m);
}

void ModuleList::append(std::shared_ptr<Module> module) {
  REMAT_CHECK(module != nullptr, "{}: cannot append a null module (at index {})", type_name(),
              modules_.size());
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& ModuleList::operator[](std::size_t index) const {
  REMAT_CHECK(index < modules_.size(), "{}: index {} is out of range for {} modules", type_name(),
              index, modules_.size());
  return modules_[index];
}

void ModuleList::wrong_type(std::size_t index) const {
  REMAT_THROW("{}: module {} is a {}, not the requested type", type_name(), index,
              modules_[index]->type_name());
}

}  // namespace remat::nn
