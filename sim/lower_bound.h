// A lower bound on the recomputation any schedule of a program needs under a budget, for graphs
// far past the optimal MIP's size (sim/optimal.h): a covering LP over absences.  At the
// original call of node t, its inputs, its outputs and the constants held then are resident;
// every other computed value still to be read (or an output) is resident too, or absent, and an
// absent value costs a recomputation of its producer before its next read.  The LP covers each
// stage's excess over the budget with absences, priced at the producer's cost shared among its
// outputs by bytes.  docs/simulator.md ("A lower bound for large programs") derives it.
// Usage: RecomputeBound b = recompute_lower_bound(graph, budget, 60); b.recompute / baseline
#pragma once
#include <cstddef>
#include <cstdint>

#include "sim/op_graph.h"

namespace remat::sim {

struct RecomputeBound {
  enum class Status {
    Bound,       // `recompute` is the LP optimum: no schedule recomputes less
    Infeasible,  // even with every droppable value absent, stage `stage` exceeds the budget
    TimeLimit,   // the LP did not finish: `recompute` is the best single stage's bound
  };
  Status status = Status::Bound;
  double recompute = 0;            // in the graph's cost units; 0 when the budget never binds
  std::int32_t stage = -1;         // Infeasible: the first stage that cannot fit
  std::size_t binding_stages = 0;  // stages whose resident set must shed something
  std::size_t absences = 0;        // LP columns: (value, interval between reads)
  double seconds = 0;
};

RecomputeBound recompute_lower_bound(const OpGraph& graph, std::size_t budget_bytes,
                                     double time_limit_seconds);

}  // namespace remat::sim
