#include "sim/chain_shape.h"

namespace remat::sim {

std::optional<ChainShape> chain_shape(const OpGraph& g) {
  ChainShape shape;
  auto forward_node = [&](std::size_t i) {
    const auto& node = g.nodes[i];
    if (node.outputs.size() != 1) return false;
    bool reads_previous = false;
    for (std::uint32_t v : node.inputs) {
      if (g.is_constant(v)) continue;
      if (i == 0 || g.values[v].producer != static_cast<std::int32_t>(i - 1)) return false;
      reads_previous = true;
    }
    return i == 0 || reads_previous;
  };
  while (shape.forward < g.nodes.size() && forward_node(shape.forward)) ++shape.forward;
  if (shape.forward == 0 || (shape.forward < 2 && shape.forward < g.nodes.size()))
    return std::nullopt;
  std::int32_t last = static_cast<std::int32_t>(shape.forward);
  std::vector<char> consumed(shape.forward, 0);
  for (std::size_t r = shape.forward; r < g.nodes.size(); ++r) {
    std::int32_t read = -1;
    for (std::uint32_t v : g.nodes[r].inputs) {
      const std::int32_t p = g.values[v].producer;
      if (p == OpGraph::kNone || p >= static_cast<std::int32_t>(shape.forward)) continue;
      if (read >= 0 || p > last) return std::nullopt;  // two activations, or not in reverse
      read = last = p;
      consumed[static_cast<std::size_t>(p)] = 1;
    }
    shape.reads.push_back(read);
  }
  if (!shape.reads.empty())
    for (std::size_t i = 0; i + 1 < shape.forward; ++i)
      if (!consumed[i]) return std::nullopt;
  return shape;
}

void keep_cheaper(const OpGraph& graph, std::size_t budget_bytes, std::vector<std::uint32_t> steps,
                  std::optional<std::vector<std::uint32_t>>& best, ScheduleCost& best_cost) {
  const ScheduleCost cost = play_schedule(graph, steps);
  if (cost.peak_bytes > budget_bytes) return;
  if (!best || cost.compute < best_cost.compute ||
      (cost.compute == best_cost.compute && cost.peak_bytes < best_cost.peak_bytes))
    best = std::move(steps), best_cost = cost;
}

std::optional<double> chain_schedule_compute(const Program& program, std::size_t budget_bytes,
                                             CostModel cost, ChainScheduler scheduler) {
  const OpGraph graph = build_op_graph(program, cost);
  const auto steps = scheduler(graph, budget_bytes);
  if (!steps) return std::nullopt;
  return play_schedule(graph, *steps).compute;
}

}  // namespace remat::sim
