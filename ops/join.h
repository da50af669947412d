// Joining tensors along a dim and splitting one into pieces, as torch.cat/stack/split/chunk.
// The pieces split, chunk and unbind return are views sharing the input's cell, each set from
// one op, so their gradients meet in one cat (stack) instead of a full-size copy per piece.
// Usage: auto y = cat({a, b}, 1); auto parts = chunk(y, 2, 1); auto s = stack({a, b}, 0);
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace remat {

// Concatenates along `dim`; every tensor has the same rank, dtype and sizes off `dim`.
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
// Joins equally shaped tensors along a new dim (dim may be in [-(rank+1), rank]).
Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
// Pieces of split_size along dim (the last may be smaller), or of the given sizes (which must
// sum to the size of dim).
std::vector<Tensor> split(const Tensor& t, std::int64_t split_size, std::int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, const std::vector<std::int64_t>& sizes,
                          std::int64_t dim = 0);
// At most `chunks` pieces of ceil(size / chunks) along dim, as torch.chunk.
std::vector<Tensor> chunk(const Tensor& t, std::int64_t chunks, std::int64_t dim = 0);
// Every index along dim as its own tensor, as torch.unbind (an empty dim gives none).
std::vector<Tensor> unbind(const Tensor& t, std::int64_t dim = 0);

}  // namespace remat
