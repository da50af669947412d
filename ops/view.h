// Views share their input's cell and change only shape, strides and offset; contiguous() and
// clone() copy.  reshape() views when the strides allow it and copies otherwise, as PyTorch.
// Usage: auto y = transpose(x, 0, 1); auto z = contiguous(y); auto row = select(x, 0, 2);
#pragma once
#include <vector>

#include "core/tensor.h"

namespace remat {

Tensor reshape(const Tensor& t, Shape shape);  // one dim may be -1
Tensor view(const Tensor& t, Shape shape);     // like reshape, but never copies (errors instead)
Tensor flatten(const Tensor& t, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
Tensor expand(const Tensor& t, Shape shape);   // -1 keeps a dim; size-1 dims broadcast
Tensor broadcast_to(const Tensor& t, const Shape& shape);
Tensor permute(const Tensor& t, std::vector<std::int64_t> dims);
Tensor transpose(const Tensor& t, std::int64_t dim0, std::int64_t dim1);
Tensor squeeze(const Tensor& t);                  // drops every size-1 dim
Tensor squeeze(const Tensor& t, std::int64_t dim);
Tensor unsqueeze(const Tensor& t, std::int64_t dim);
// Elements start, start+step, ... < end along dim (negative start/end count from the end).
Tensor slice(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t end,
             std::int64_t step = 1);
Tensor narrow(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t length);
Tensor select(const Tensor& t, std::int64_t dim, std::int64_t index);  // drops dim

Tensor contiguous(const Tensor& t);  // t itself when already contiguous
Tensor clone(const Tensor& t);       // always a new cell; differentiable
// A new handle on the same cell without autograd history (a leaf that does not require grad).
Tensor detach(const Tensor& t);

}  // namespace remat
