// Quick feasible schedules of an OpGraph under a budget, which start the optimal MIP (CBC alone
// finds poor ones late): each stage recomputes, in program order, what its call needs, and
// evicts by a rule that knows the future.  No optimality claim.
// Usage: auto steps = greedy_schedule(graph, budget, GreedyRule::CheapestPerByte);
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "sim/op_graph.h"

namespace remat::sim {

enum class GreedyRule {
  FurthestUse,      // Belady: the value read again last goes first
  CheapestPerByte,  // DTR's score with the future known: recompute cost / (bytes x time to next
                    // use)
};

// Node ids in execution order (as play_schedule takes them), or nullopt when the rule paints
// itself into a corner: what a step needs at once no longer fits.
std::optional<std::vector<std::uint32_t>> greedy_schedule(const OpGraph& graph,
                                                          std::size_t budget_bytes,
                                                          GreedyRule rule);

}  // namespace remat::sim
