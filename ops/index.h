// Indexing ops with int64 indices, as in PyTorch.
// Usage: auto rows = index_select(x, 0, idx); auto picked = gather(logits, 1, labels2d);
#pragma once
#include <vector>

#include "core/tensor.h"

namespace remat {

// Slabs of t along dim picked by a 1-D int64 index (out.shape[dim] == index.numel()).
Tensor index_select(const Tensor& t, std::int64_t dim, const Tensor& index);
// A copy of t with src's slab j added to slab index[j] along dim, in index order, so repeated
// indices accumulate deterministically (torch.index_add); differentiable in t and src.
Tensor index_add(const Tensor& t, std::int64_t dim, const Tensor& index, const Tensor& src);
// out[i][j] = t[i][index[i][j]] for dim 1 (and likewise for other dims); index has t's rank.
Tensor gather(const Tensor& t, std::int64_t dim, const Tensor& index);
// A copy of t with src added at index along dim (torch.scatter_add); differentiable in t and src.
Tensor scatter_add(const Tensor& t, std::int64_t dim, const Tensor& index, const Tensor& src);
// One-hot rows of an int64 tensor (num_classes < 0: max + 1), in `dtype`; not differentiable.
Tensor one_hot(const Tensor& labels, std::int64_t num_classes = -1, DType dtype = DType::Int64);
// Rows of `weight` picked by int64 `indices`; the result has shape indices.shape + [dim].
Tensor embedding(const Tensor& weight, const Tensor& indices);
// The same, with positions whose index is padding_idx (negative: counted from the end) giving
// weight's row but no gradient to it, as torch.nn.functional.embedding(padding_idx=...).
Tensor embedding(const Tensor& weight, const Tensor& indices, std::int64_t padding_idx);
// The upper (triu: column - row >= diagonal) or lower (tril: column - row <= diagonal)
// triangle of the last two dims, zeros elsewhere (also where t is NaN), as torch.triu/tril.
Tensor triu(const Tensor& t, std::int64_t diagonal = 0);
Tensor tril(const Tensor& t, std::int64_t diagonal = 0);

}  // namespace remat
