// Copies between devices: to(t, Device::cuda()) and back.  Differentiable (the gradient is
// copied back to the input's device).  The copy is a constant of its pool, as loaded data is:
// the cache does not recompute it from a cell of another device's pool.
// Usage: Tensor x = to(randn({64, 3, 32, 32}), Device::cuda());  float v = to(y,
// Device::cpu()).item<float>();
#pragma once
#include "core/device.h"
#include "core/tensor.h"

namespace remat {

// t itself when it is already on `device`.
Tensor to(const Tensor& t, Device device);

}  // namespace remat
