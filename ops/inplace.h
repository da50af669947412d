// In-place ops (optimizer updates, buffer updates).  They change the tensor's cell directly when
// no record can still replay from the old value; otherwise the cache moves the old value to a
// new cell first (copy-on-write), so a later rematerialization reads what the op originally
// read.  Not differentiable: in grad mode, tensors that require grad cannot be changed in place.
// Usage: { NoGradGuard g; add_(param, grad, -lr); }
#pragma once
#include "core/tensor.h"

namespace remat {

const Tensor& add_(const Tensor& self, const Tensor& other, double alpha = 1);  // self += alpha*other
const Tensor& add_(const Tensor& self, double value);
const Tensor& sub_(const Tensor& self, const Tensor& other, double alpha = 1);
const Tensor& mul_(const Tensor& self, const Tensor& other);
const Tensor& mul_(const Tensor& self, double value);
const Tensor& div_(const Tensor& self, const Tensor& other);
const Tensor& div_(const Tensor& self, double value);
const Tensor& addcmul_(const Tensor& self, const Tensor& a, const Tensor& b, double value = 1);
const Tensor& addcdiv_(const Tensor& self, const Tensor& a, const Tensor& b, double value = 1);
const Tensor& zero_(const Tensor& self);
const Tensor& fill_(const Tensor& self, double value);
const Tensor& copy_(const Tensor& self, const Tensor& src);  // src broadcasts to self

}  // namespace remat
