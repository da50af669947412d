// A recorded Program as a static dataflow graph for offline schedulers (the optimal MIP, Chen's
// segments): one node per op call in program order, one value per storage.  Stage t is the
// moment of node t's original call; a value's stages say when it must or may be resident.
// Usage: OpGraph g = build_op_graph(program, CostModel::Unit); play_schedule(g, steps);
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dtr/config.h"
#include "sim/program.h"

namespace remat::sim {

struct OpGraph {
  static constexpr std::int32_t kNone = -1;

  struct Node {
    std::string op;
    std::vector<std::uint32_t> inputs;   // distinct values read (aliases resolved to storage)
    std::vector<std::uint32_t> outputs;  // values it creates; aliased results add none
    double cost = 0;
    std::size_t bytes = 0;  // sum of outputs: allocated whenever it runs
    std::size_t line = 0;   // in the input, for messages
  };

  struct Value {
    std::size_t bytes = 0;
    std::int32_t producer = kNone;  // node, or kNone for a constant
    // Constants only: resident from the start of stage `created` to the end of stage
    // `held_until` (a handle still refers to it; the pool cannot free it).  held_until <
    // created when it was released before any call ran.
    std::int32_t created = 0;
    std::int32_t held_until = kNone;
    bool output = false;  // still referenced at the end: resident when the run ends
    // Last stage in which it can still be of use: read by a call then, an output, or read by a
    // node whose result is still of use then (for recomputation).  kNone when never.
    std::int32_t live_until = kNone;
    std::vector<std::uint32_t> readers;  // nodes reading it, ascending
  };

  std::vector<Node> nodes;
  std::vector<Value> values;
  // With a result among the outputs, a last stage (index nodes.size()) with no call of its own
  // rematerializes them, as the simulator does when the run ends.
  bool final_stage = false;

  std::size_t stages() const { return nodes.size() + (final_stage ? 1 : 0); }
  bool is_constant(std::uint32_t v) const { return values[v].producer == kNone; }
  double baseline_compute() const;  // every call once
};

// Calls and mutations become nodes, costed by event_cost.  A prototype log's mutation creates a
// value per mutated arg; a trace's writes in place (the value keeps its storage).  ACCESS and
// PIN become zero-cost nodes reading the tensor (it must be resident then).  References
// (results, COPY, COPY_FROM, RELEASE) decide how long a constant is held and, for prototype
// logs, what must be resident at the end.  That a pinned or written cell can no longer be
// evicted only restricts the simulator, so the graph leaves it out.
OpGraph build_op_graph(const Program& program, CostModel cost);

// Fills every value's `readers` and `live_until` from the nodes, the outputs and the stages.
void link_readers(OpGraph& graph);

// What playing a static schedule costs.
struct ScheduleCost {
  double compute = 0;
  std::size_t peak_bytes = 0;
};

// Plays `steps`, node ids in execution order, with the simulator's memory rules: a step holds
// its inputs and its outputs at once; a computed value is freed right after its last read
// before the next recomputation of its producer (outputs stay to the end); constants stay for
// their hold and their reads.  Node t's original call is the last step of stage t, so every node
// must appear in program order, and only earlier nodes may be recomputed before it; steps after
// the last node form the final stage.  Throws remat::Error naming the first step that breaks
// this or reads a value not computed yet.
ScheduleCost play_schedule(const OpGraph& graph, std::span<const std::uint32_t> steps);

}  // namespace remat::sim
