// The shape of a chain program (what dtr_chain records), which Chen's segments and binomial
// checkpointing schedule:
//   forward  nodes 0..F-1, each with one result; node 0 reads only constants, node i reads node
//            i-1's result (plus constants);
//   the rest nodes after it (the backward), each reading at most one forward result, plus
//            constants and results of rest nodes; together they read every forward result but
//            the last, in non-increasing order of position.  F >= 2 when there is a rest.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "sim/op_graph.h"

namespace remat::sim {

struct ChainShape {
  std::size_t forward = 0;
  std::vector<std::int32_t> reads;  // per rest node: the forward node whose result it reads, or -1
};

std::optional<ChainShape> chain_shape(const OpGraph& g);

// Keeps `steps` as `best` when it fits the budget and computes less than `best` (or as much at
// a lower peak).
void keep_cheaper(const OpGraph& graph, std::size_t budget_bytes, std::vector<std::uint32_t> steps,
                  std::optional<std::vector<std::uint32_t>>& best, ScheduleCost& best_cost);

// The compute of the schedule `scheduler` finds for `program` under the budget, or nullopt.
using ChainScheduler = std::optional<std::vector<std::uint32_t>> (*)(const OpGraph&, std::size_t);
std::optional<double> chain_schedule_compute(const Program& program, std::size_t budget_bytes,
                                             CostModel cost, ChainScheduler scheduler);

}  // namespace remat::sim
