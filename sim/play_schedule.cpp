// play_schedule (declared in sim/op_graph.h): the independent check of static schedules, used
// to measure Chen's segments and to verify the MIP's decoded solutions.
#include <algorithm>

#include "core/error.h"
#include "sim/op_graph.h"

namespace remat::sim {

ScheduleCost play_schedule(const OpGraph& g, std::span<const std::uint32_t> steps) {
  const std::size_t m = steps.size(), n = g.nodes.size();
  // Stage of every step: node t's original call closes stage t.
  std::vector<std::int32_t> stage(m);
  std::vector<std::size_t> stage_end(g.stages() + 1, m);  // last step of each stage
  std::uint32_t frontier = 0;
  for (std::size_t s = 0; s < m; ++s) {
    const std::uint32_t k = steps[s];
    REMAT_CHECK(k < n, "schedule step {}: node {} does not exist ({} nodes)", s, k, n);
    REMAT_CHECK(k <= frontier,
                "schedule step {}: node {} runs before node {}, whose call comes first", s, k,
                frontier);
    stage[s] = static_cast<std::int32_t>(frontier);
    if (k == frontier) stage_end[frontier++] = s;
  }
  REMAT_CHECK(frontier == n, "schedule: node {} ({}) never runs", frontier,
              frontier < n ? g.nodes[frontier].op : "");
  if (g.final_stage && m > 0) stage_end[n] = m - 1;

  // Each computation of a node is an instance of each of its outputs; the instance read is the
  // latest.  Outputs are freed separately: last_read[first_out[s] + i] is output i's at step s.
  std::vector<std::size_t> latest(n, m), next_same(m, m), first_out(m + 1, 0);
  {
    std::vector<std::size_t> next(n, m);
    for (std::size_t s = m; s-- > 0;) next_same[s] = next[steps[s]], next[steps[s]] = s;
    for (std::size_t s = 0; s < m; ++s)
      first_out[s + 1] = first_out[s] + g.nodes[steps[s]].outputs.size();
  }
  std::vector<std::size_t> last_read(first_out[m], m);
  const auto output_index = [&](std::uint32_t node, std::uint32_t v) {
    const auto& outs = g.nodes[node].outputs;
    return static_cast<std::size_t>(std::find(outs.begin(), outs.end(), v) - outs.begin());
  };
  std::vector<std::size_t> const_first(g.values.size(), m), const_last(g.values.size(), m);
  for (std::size_t s = 0; s < m; ++s) {
    for (std::uint32_t v : g.nodes[steps[s]].inputs) {
      const OpGraph::Value& val = g.values[v];
      if (val.producer == OpGraph::kNone) {
        REMAT_CHECK(val.created <= stage[s],
                    "schedule step {}: node {} ({}) reads a constant created later", s, steps[s],
                    g.nodes[steps[s]].op);
        const_last[v] = const_last[v] == m ? s : std::max(const_last[v], s);
        continue;
      }
      const std::size_t inst = latest[static_cast<std::size_t>(val.producer)];
      REMAT_CHECK(inst != m,
                  "schedule step {}: node {} ({}) reads the result of node {}, not computed yet", s,
                  steps[s], g.nodes[steps[s]].op, val.producer);
      last_read[first_out[inst] + output_index(steps[inst], v)] = s;  // the latest read wins
    }
    latest[steps[s]] = s;
  }

  // Bytes added before each step runs and removed after it.
  std::vector<std::size_t> add(m + 1, 0), sub(m + 1, 0);
  for (std::size_t v = 0; v < g.values.size(); ++v) {
    const OpGraph::Value& val = g.values[v];
    if (val.producer != OpGraph::kNone) continue;
    std::size_t first = m, last = const_last[v];
    for (std::size_t s = 0; s < m; ++s)
      if (stage[s] >= val.created) {
        first = s;
        break;
      }
    if (val.held_until >= val.created) {
      const std::size_t held_end = stage_end[static_cast<std::size_t>(val.held_until)];
      last = last == m ? held_end : std::max(last, held_end);
    }
    if (first == m || last == m) continue;
    add[first] += val.bytes;
    sub[last] += val.bytes;
  }
  ScheduleCost cost;
  for (std::size_t s = 0; s < m; ++s) {
    const OpGraph::Node& node = g.nodes[steps[s]];
    cost.compute += node.cost;
    add[s] += node.bytes;
    for (std::size_t i = 0; i < node.outputs.size(); ++i) {
      const std::uint32_t v = node.outputs[i];
      // Freed after its last read before the producer runs again; an output's final instance stays.
      const bool stays = g.values[v].output && next_same[s] == m;
      const std::size_t read = last_read[first_out[s] + i];
      if (!stays) sub[read == m || read > next_same[s] ? s : read] += g.values[v].bytes;
    }
  }
  std::size_t resident = 0;
  for (std::size_t s = 0; s < m; ++s) {
    resident += add[s];
    cost.peak_bytes = std::max(cost.peak_bytes, resident);
    resident -= sub[s];
  }
  return cost;
}

}  // namespace remat::sim
