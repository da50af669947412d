// Dropout with a counter-based mask: the op's record holds its Philox key, so a replay (after
// eviction, or in a checkpointed region) redraws exactly the same mask.
// Usage: auto h = dropout(x, 0.5, /*training=*/true);  auto r = dropout(x, 0.1, true, /*seed=*/7);
#pragma once
#include <cstdint>
#include <optional>

#include "core/random.h"
#include "core/tensor.h"

namespace remat {

// Training: x * mask / (1 - p), each element kept with probability 1 - p.  The key comes from
// the default generator (manual_seed) unless `seed` is given.  Evaluation or p == 0: x itself;
// p == 1: zeros (x * 0, so gradients flow as zeros).  p outside [0, 1] is an error.
Tensor dropout(const Tensor& x, double p, bool training,
               std::optional<std::uint64_t> seed = std::nullopt);

namespace detail {
// Training-mode dropout with a given key (0 < p < 1): the mask a fused op drew from that key
// for a contiguous tensor of x's shape (fused attention's derivative under create_graph).
Tensor dropout_with_key(const Tensor& x, double p, RngKey key);
}  // namespace detail

}  // namespace remat
