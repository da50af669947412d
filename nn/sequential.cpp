#include "nn/sequential.h"

namespace remat::nn {

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& m : *this) x = m->forward(x);
  return x;
}

}  // namespace remat::nn
