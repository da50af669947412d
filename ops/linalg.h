// Matrix products: matmul with torch.matmul semantics (1-D, 2-D and broadcast batched operands)
// and linear layers (x @ weight^T + bias).  float32 runs on oneDNN, float64 on Eigen.
// Usage: auto y = matmul(a, b);  auto h = linear(x, w, b);  auto z = linear(x, w);
#pragma once
#include "core/tensor.h"

namespace remat {

// As torch.matmul: 1-D @ 1-D is a dot product (0-dim result); a 1-D operand is treated as a row
// (left) or column (right) vector and that dim is dropped from the result; otherwise the last two
// dims multiply and the leading (batch) dims broadcast.  float32 and float64 only.
Tensor matmul(const Tensor& a, const Tensor& b);

// x [..., in], weight [out, in], bias [out] or undefined (no bias); result [..., out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace remat
