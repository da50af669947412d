// A chain of modules, each fed the previous one's output; children are named "0", "1", ...
// so parameters read "0.weight", "2.bias" as in PyTorch.
// Usage: auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(784, 128),
//                                                   std::make_shared<nn::ReLU>());
//        net->push_back(std::make_shared<nn::Linear>(128, 10));  auto y = net->forward(x);
#pragma once
#include <initializer_list>
#include <memory>

#include "nn/module_list.h"

namespace remat::nn {

class Sequential : public ModuleList {
 public:
  Sequential() : ModuleList("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules)
      : ModuleList(modules, "Sequential") {}
  // Variadic, so std::make_shared<Sequential>(a, b, c) works (Modules cannot be copied).
  template <class... M>
  requires(sizeof...(M) > 0) explicit Sequential(std::shared_ptr<M>... modules)
      : ModuleList("Sequential") {
    (append(std::move(modules)), ...);
  }

  // Applies every module in order; an empty Sequential returns its input.
  Tensor forward(const Tensor& input) override;
};

}  // namespace remat::nn
