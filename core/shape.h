// Shapes, strides and the small rules on them (broadcasting, dim wrapping) that every op's
// shape rule uses.  Usage: Shape s = broadcast_shapes("add", a.shape(), b.shape());
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/small_shape.h"

namespace remat {

std::int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
// Whether a shape from outside the program (a file) is usable: no negative dimension, and its
// strides, element count and byte size (8-byte elements) all fit in 64 bits.  Zeros count as one
// in the strides, so a 0-element shape with huge dimensions does not fit either.
bool shape_fits(const Shape& shape);
// Result shape of broadcasting a with b (NumPy rules); throws naming `op` and both shapes.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);
// Wraps a possibly negative dim into [0, ndim); throws naming `op`.
std::int64_t wrap_dim(std::string_view op, std::int64_t dim, std::int64_t ndim);

}  // namespace remat
