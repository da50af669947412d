// Internal: the eviction heuristics, all scoring the same cell metadata (size m, cost c0,
// staleness s, evicted neighbourhood e*); the lowest score is evicted.  Also keeps the union-find
// classes of evicted cells that dtr-eq uses to approximate e*.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "dtr/cell.h"

namespace remat {

struct NeighbourhoodWalk {
  std::uint64_t stamp;
  double cost = 0;
  std::size_t count = 0;
  std::uint64_t accesses = 0;
  // The walk stops once cost (or count) passes these: the candidate already scores above the
  // best one seen, so the rest of its neighbourhood cannot change the choice.
  double max_cost = std::numeric_limits<double>::infinity();
  double max_count = std::numeric_limits<double>::infinity();
  bool over() const { return cost > max_cost || static_cast<double>(count) > max_count; }
};

struct Heuristics {
  // Score of a resident candidate under the pool's configured heuristic and cost model.  With a
  // `bound`, a score known to exceed it may be returned early (any value above the bound): the
  // exact heuristics stop walking e* there, which leaves the victim chosen unchanged.
  static double score(Pool& pool, Cell& cell,
                      double bound = std::numeric_limits<double>::infinity());
  // dtr-next predicting: the parts of its score known before its walks of evicted cells (the
  // cell's own predicted distance, the gone ancestors' cost), and the score without those walks
  // (`floor`, no greater than the score), for scoring the likeliest victims first.  Otherwise
  // a floor of 0.  The gone ancestors are walked only where no answer is kept for the cell's
  // next read; until then (`exact` false) `floor` is the least the floor can be, whatever they
  // cost, and complete_parts finds the rest for the candidates that get that far.
  struct NextParts {
    double floor = 0;
    double distance = 1;
    double gone_cost = 0;
    double walked = 0;  // the kept walk of evicted ancestors the floor counts
    bool exact = true;
  };
  static NextParts next_parts(Pool& pool, Cell& cell);
  static void complete_parts(Pool& pool, Cell& cell, NextParts& parts);
  // score() from next_parts taken at this instant: the same value, without computing the parts
  // again (dtr-next predicting).
  static double score(Pool& pool, Cell& cell, const NextParts& parts, double bound);
  // dtr-eq bookkeeping: an eviction merges the cell with its evicted neighbours' classes; a
  // rematerialization subtracts its cost from its class (the constant-time split of the paper).
  static void on_evicted(Pool& pool, Cell& cell);
  // A swap of `cell` (DtrConfig::swap_cost_per_byte) scored as an eviction candidate whose
  // cost is `copy_cost` and whose evicted neighbourhood is empty, on the same scale as score().
  static double swap_score(Pool& pool, const Cell& cell, double copy_cost);
  static void on_rematerialized(Pool& pool, Cell& cell);
  // A fresh visit stamp, and marks every neighbour of the cell (inputs of its record and live
  // dependents) with one.
  static std::uint64_t new_stamp();
  static void mark_neighbours(Cell& cell, std::uint64_t stamp);
  // The evicted closure e* of a cell: up through evicted inputs, down through evicted dependents.
  static void evicted_closure(Cell& start, CostModel model, bool ancestors, bool descendants,
                              NeighbourhoodWalk& walk);
  // The cost of the evicted ancestors of a resident cell (msps's and dtr-next's e*, up only), or
  // infinity once it passes `max_cost`.  Kept per cell and walked again only once the walk
  // changed (Pool::invalidate_walks): between two searches most of them have not.
  static double evicted_ancestors_cost(Pool& pool, Cell& cell, double max_cost);
  // dtr-next's time term, the distance in calls to the cell's predicted next read (kept per
  // cell until passed), and the cost of the ancestors it would rebuild along (see the .cpp).
  struct NextUse {
    double distance;
    double gone_cost = 0;
  };
  static NextUse next_use(Pool& pool, const Cell& cell, double c0, double staleness);

 private:
  // Every score's inputs: staleness, size and the cell's own cost.
  struct Basics {
    double s, m, c0;
  };
  static Basics basics(const Pool& pool, const Cell& cell);
  // The prototype divides by a staleness of 0: a value stamped at this instant scores infinity.
  static bool stamped_now(const Pool& pool, const Cell& cell);
  static NextParts next_parts(Pool& pool, Cell& cell, const Basics& b);
  // The call of the cell's predicted next read (Cell::kNoNextUse: none), kept per cell.
  static std::uint32_t next_read(Pool& pool, const Cell& cell);
  // next_use's answer for a next read at call `at` (Cell::kNoNextUse: none).
  static NextUse use_at(Pool& pool, const Cell& cell, double c0, std::uint32_t at);
  // The cell's kept walk of evicted ancestors while it holds (a lower bound on their cost),
  // else 0.
  static double kept_walk(const Pool& pool, const Cell& cell);
  // The parts for a next read at call `at` (Cell::kNoNextUse: none), the gone ancestors
  // walked unless kept.
  static void settle_parts(Pool& pool, const Cell& cell, const Basics& b, std::uint32_t at,
                           NextParts& parts);
  // The distance in calls, from now, to a predicted read at call `at` of this step.
  static double read_distance(const Pool& pool, std::uint32_t at);
  // dtr-next's staleness in calls, for a cell without a predicted read (see next_use).
  static double calls_stale(const Pool& pool, const Cell& cell);
  // dtr-next's time term for a distance of `distance` calls: the distance, under the damped
  // score (dtr/score_choice.h) the distance up to 64 calls and its square root past them, under
  // the capped one at most 64.
  static double time_term(const Pool& pool, double distance);
  static double random_score(Pool& pool);
  static double eq_cost(Pool& pool, Cell& cell, double c0);
  // dtr-eq's score, eq_cost / (m·s), or infinity once the cell's own cost puts it past `bound`.
  static double eq_score(Pool& pool, Cell& cell, const Basics& b, double bound);
  // msps's score, (c0 + the evicted ancestors' cost) / m, or infinity past `bound`.
  static double msps_score(Pool& pool, Cell& cell, const Basics& b, double bound);
  // gone_ancestors_cost of the cell's record at call `at`, kept per cell.
  static double gone_cost(Pool& pool, const Cell& cell, std::uint32_t at);
  // The nearest predicted use among the evicted cells that rebuilding needs `cell` for (its
  // evicted dependents, and theirs), or `distance` when it is nearer.
  static double needed_by_evicted(Pool& pool, Cell& cell, double distance);
  static double next_score(Pool& pool, Cell& cell, const Basics& b, const NextParts& parts,
                           double bound);
  static double gone_ancestors_cost(const Pool& pool, const Record& r, std::uint32_t at,
                                    CostModel model, int& visits, std::uint64_t stamp);
};

}  // namespace remat
