// The op graph without its sinks, the nodes that create nothing (ACCESS, PIN and a trace's
// in-place writes, such as optimizer updates), which the optimal MIP solves instead of the
// whole graph: they are a third to a half of a trace's nodes, and the MIP grows with the square
// of its stages.  A sink is never recomputed (it has no result of use), so it only runs once,
// in the baseline; dropping it only drops the requirement that its arguments be resident then.
// So any schedule of the whole graph less its sinks is one of the smaller graph, as costly and
// holding nothing longer, and a lower bound for the smaller graph bounds the whole one.
// Usage: Sinks s = without_sinks(g); ... auto steps = with_sinks(g, s, solved);
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "sim/op_graph.h"

namespace remat::sim {

struct Sinks {
  OpGraph graph;                        // the nodes that create something
  std::vector<std::uint32_t> original;  // node k of `graph` is node original[k] of the whole
  std::vector<std::int32_t> reduced;    // the inverse: kNone for a sink
};

Sinks without_sinks(const OpGraph& whole);

// `steps` of the whole graph less its sinks, in the smaller graph's ids.
std::vector<std::uint32_t> drop_sinks(const Sinks& s, std::span<const std::uint32_t> steps);

// A schedule of the smaller graph in the whole graph's ids, each sink put back in the stage of
// the next kept node, right after the last computation there of a value it reads (at the
// stage's start when none), so that it holds its arguments as briefly as the order allows.
// play_schedule on the whole graph says whether the result still fits a budget.
std::vector<std::uint32_t> with_sinks(const OpGraph& whole, const Sinks& s,
                                      std::span<const std::uint32_t> steps);

}  // namespace remat::sim
