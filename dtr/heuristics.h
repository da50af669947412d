// Internal: the eviction heuristics, all scoring the same cell metadata (size m, cost c0,
// staleness s, evicted neighbourhood e*); the lowest score is evicted.  Also keeps the union-find
// classes of evicted cells that dtr-eq uses to approximate e*.
#pragma once
#include <cstdint>

#include "dtr/cell.h"

namespace remat {

struct NeighbourhoodWalk {
  std::uint64_t stamp;
  double cost = 0;
  std::size_t count = 0;
  std::uint64_t accesses = 0;
};

struct Heuristics {
  // Score of a resident candidate under the pool's configured heuristic and cost model.
  static double score(Pool& pool, Cell& cell);
  // dtr-eq bookkeeping: an eviction merges the cell with its evicted neighbours' classes; a
  // rematerialization subtracts its cost from its class (the constant-time split of the paper).
  static void on_evicted(Pool& pool, Cell& cell);
  static void on_rematerialized(Pool& pool, Cell& cell);
  // The evicted closure e* of a cell: up through evicted inputs, down through evicted dependents.
  static void evicted_closure(Cell& start, CostModel model, bool ancestors, bool descendants,
                              NeighbourhoodWalk& walk);
};

}  // namespace remat
