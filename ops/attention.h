// Scaled dot-product attention as one op: scores, additive mask, softmax, dropout and the
// weighted sum of values, per (batch, head) in blocks of query rows that stay in cache.  It
// saves only its inputs and two numbers per query row (the row maximum and 1 / sum), never the
// [L, S] score or weight matrices: its derivative recomputes them, with the same bits.  With a
// graph of the gradient being built (create_graph) the derivative is written with public ops
// instead, so second derivatives work.
// Usage: Tensor o = attention(q, k, v, causal_mask(L), 1 / std::sqrt(64.0), 0.1, true);
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace remat {

// q [..., L, E], k [..., S, E], v [..., S, Ev] with equal leading dims; mask undefined, float
// (added to the scores, -inf forbids) or int64 (non-zero forbids), broadcasting to
// [..., L, S]; returns [..., L, Ev].  Dropout applies to the weights when training and
// dropout_p > 0, with a key from the default generator.  is_causal: query i attends to keys
// 0..i only (PyTorch's is_causal, top-left aligned when L != S), on top of any mask; the
// forbidden scores are never computed.  A mask that requires grad is not supported here (use
// matmul and softmax).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                 double scale, double dropout_p = 0, bool training = false, bool is_causal = false);

}  // namespace remat
