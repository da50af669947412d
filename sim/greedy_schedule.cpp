#include "sim/greedy_schedule.h"

#include <algorithm>
#include <limits>

namespace remat::sim {
namespace {

class Greedy {
 public:
  Greedy(const OpGraph& g, std::size_t budget, GreedyRule rule)
      : g_(g), budget_(budget), rule_(rule), resident_(g.values.size(), 0) {}

  std::optional<std::vector<std::uint32_t>> run() {
    for (std::size_t t = 0; t < g_.stages(); ++t)
      if (!stage(static_cast<std::int32_t>(t))) return std::nullopt;
    return steps_;
  }

 private:
  // A constant stays from its creation to the end of its hold or its last possible read.
  std::int32_t constant_end(std::uint32_t v) const {
    return std::max(g_.values[v].held_until, g_.values[v].live_until);
  }

  void set(std::uint32_t v, bool on) {
    if (resident_[v] == on) return;
    resident_[v] = on;
    if (on)
      bytes_ += g_.values[v].bytes;
    else
      bytes_ -= g_.values[v].bytes;
  }

  bool stage(std::int32_t t) {
    const std::size_t n = g_.nodes.size();
    for (std::uint32_t v = 0; v < g_.values.size(); ++v) {
      const auto& val = g_.values[v];
      if (val.producer == OpGraph::kNone && val.created == t && constant_end(v) >= t) set(v, true);
      if (val.producer != OpGraph::kNone && val.live_until < t) set(v, false);  // of no more use
    }
    // What the stage computes: the call, after whatever of its inputs is missing, recursively.
    std::vector<char> in_stage(n, 0);
    std::vector<std::uint32_t> todo;
    auto need = [&](std::uint32_t v) {
      if (resident_[v]) return true;
      const std::int32_t p = g_.values[v].producer;
      if (p == OpGraph::kNone) return false;  // a constant freed for good
      if (!in_stage[static_cast<std::size_t>(p)])
        in_stage[static_cast<std::size_t>(p)] = 1, todo.push_back(static_cast<std::uint32_t>(p));
      return true;
    };
    if (static_cast<std::size_t>(t) < n)
      in_stage[static_cast<std::size_t>(t)] = 1, todo.push_back(static_cast<std::uint32_t>(t));
    else
      for (std::uint32_t v = 0; v < g_.values.size(); ++v)
        if (g_.values[v].output && !need(v)) return false;
    while (!todo.empty()) {
      const std::uint32_t k = todo.back();
      todo.pop_back();
      for (std::uint32_t v : g_.nodes[k].inputs)
        if (!need(v)) return false;
    }
    std::vector<std::uint32_t> order;
    for (std::uint32_t k = 0; k < n; ++k)
      if (in_stage[k]) order.push_back(k);
    // Values read later in the stage must stay until then.
    std::vector<std::size_t> last_read(g_.values.size(), 0);
    std::vector<char> read_in_stage(g_.values.size(), 0);
    for (std::size_t i = 0; i < order.size(); ++i)
      for (std::uint32_t v : g_.nodes[order[i]].inputs) last_read[v] = i, read_in_stage[v] = 1;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto& node = g_.nodes[order[i]];
      for (std::uint32_t w : node.outputs) set(w, false);  // the old copy's last read is past
      while (bytes_ + node.bytes > budget_) {
        const auto victim = choose(t, i, last_read, read_in_stage);
        if (!victim) return false;
        set(*victim, false);
      }
      steps_.push_back(order[i]);
      for (std::uint32_t w : node.outputs) set(w, true);
      for (std::uint32_t v : node.inputs)
        if (last_read[v] == i && !g_.is_constant(v) && g_.values[v].live_until <= t) set(v, false);
    }
    for (std::uint32_t v = 0; v < g_.values.size(); ++v)
      if (g_.is_constant(v) && constant_end(v) == t) set(v, false);
    return true;
  }

  std::optional<std::uint32_t> choose(std::int32_t t, std::size_t step,
                                      const std::vector<std::size_t>& last_read,
                                      const std::vector<char>& read_in_stage) const {
    std::optional<std::uint32_t> best;
    double best_score = 0;
    for (std::uint32_t v = 0; v < g_.values.size(); ++v) {
      if (!resident_[v] || g_.is_constant(v) || (read_in_stage[v] && last_read[v] >= step))
        continue;
      std::int32_t next = g_.values[v].live_until;
      for (std::uint32_t j : g_.values[v].readers)
        if (static_cast<std::int32_t>(j) > t) {
          next = static_cast<std::int32_t>(j);
          break;
        }
      const double distance = std::max(1, next - t);
      const double bytes = std::max<double>(1, static_cast<double>(g_.values[v].bytes));
      // Lower scores go first.
      const double score = rule_ == GreedyRule::FurthestUse
                               ? -(distance * bytes)
                               : recompute_cost(v) / (bytes * distance);
      if (!best || score < best_score) best = v, best_score = score;
    }
    return best;
  }

  // The producer's cost plus that of every missing ancestor it would need: DTR's e*.
  double recompute_cost(std::uint32_t v) const {
    std::vector<char> seen(g_.nodes.size(), 0);
    std::vector<std::uint32_t> todo{static_cast<std::uint32_t>(g_.values[v].producer)};
    double cost = 0;
    while (!todo.empty()) {
      const std::uint32_t k = todo.back();
      todo.pop_back();
      if (seen[k]) continue;
      seen[k] = 1;
      cost += g_.nodes[k].cost;
      for (std::uint32_t u : g_.nodes[k].inputs)
        if (!resident_[u] && !g_.is_constant(u))
          todo.push_back(static_cast<std::uint32_t>(g_.values[u].producer));
    }
    return cost;
  }

  const OpGraph& g_;
  std::size_t budget_;
  GreedyRule rule_;
  std::vector<char> resident_;
  std::size_t bytes_ = 0;
  std::vector<std::uint32_t> steps_;
};

}  // namespace

std::optional<std::vector<std::uint32_t>> greedy_schedule(const OpGraph& graph,
                                                          std::size_t budget_bytes,
                                                          GreedyRule rule) {
  return Greedy(graph, budget_bytes, rule).run();
}

}  // namespace remat::sim
