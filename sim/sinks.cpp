#include "sim/sinks.h"

#include <algorithm>

namespace remat::sim {
namespace {

bool sink(const OpGraph::Node& n) {
  return n.outputs.empty();
}

}  // namespace

Sinks without_sinks(const OpGraph& whole) {
  Sinks r;
  r.reduced.assign(whole.nodes.size(), OpGraph::kNone);
  // kept_before[s]: kept nodes among whole stages 0..s-1 (the final stage counts as kept).
  std::vector<std::int32_t> kept_before(whole.nodes.size() + 2, 0);
  for (std::uint32_t k = 0; k < whole.nodes.size(); ++k) {
    kept_before[k + 1] = kept_before[k];
    if (sink(whole.nodes[k])) continue;
    r.reduced[k] = static_cast<std::int32_t>(r.original.size());
    r.original.push_back(k);
    r.graph.nodes.push_back(whole.nodes[k]);
    ++kept_before[k + 1];
  }
  kept_before[whole.nodes.size() + 1] = kept_before[whole.nodes.size()] + 1;
  r.graph.final_stage = whole.final_stage;
  r.graph.values = whole.values;
  const auto stage_index = [&](std::int32_t s) {
    return static_cast<std::size_t>(
        std::clamp<std::int32_t>(s, 0, static_cast<std::int32_t>(whole.nodes.size()) + 1));
  };
  for (auto& val : r.graph.values) {
    if (val.producer != OpGraph::kNone) {
      val.producer = r.reduced[static_cast<std::size_t>(val.producer)];
      continue;
    }
    // Held from the first kept stage at or after its creation through the last kept stage at or
    // before the end of its hold: never longer than in the whole graph.
    val.created = kept_before[stage_index(val.created)];
    val.held_until =
        val.held_until < 0 ? val.held_until : kept_before[stage_index(val.held_until + 1)] - 1;
  }
  link_readers(r.graph);
  return r;
}

std::vector<std::uint32_t> drop_sinks(const Sinks& r, std::span<const std::uint32_t> steps) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t k : steps)
    if (r.reduced[k] != OpGraph::kNone) out.push_back(static_cast<std::uint32_t>(r.reduced[k]));
  return out;
}

std::vector<std::uint32_t> with_sinks(const OpGraph& whole, const Sinks& r,
                                      std::span<const std::uint32_t> steps) {
  std::vector<std::uint32_t> out;
  std::vector<std::uint32_t> stage;              // the current stage's steps, in whole ids
  std::uint32_t next_sink = 0;                   // the first sink not yet placed (scan position)
  const auto place = [&](std::uint32_t until) {  // sink before whole node `until`
    std::size_t at = 0;                          // sinks keep program order within the stage
    for (; next_sink < until; ++next_sink) {
      if (r.reduced[next_sink] != OpGraph::kNone) continue;
      for (std::uint32_t v : whole.nodes[next_sink].inputs) {
        const std::int32_t p = whole.values[v].producer;
        for (std::size_t i = stage.size(); i-- > at;)
          if (static_cast<std::int32_t>(stage[i]) == p) {
            at = i + 1;
            break;
          }
      }
      stage.insert(stage.begin() + static_cast<std::ptrdiff_t>(at), next_sink);
      ++at;
    }
  };
  std::size_t frontier = 0;  // the kept node whose stage is being read
  for (std::uint32_t k : steps) {
    const std::uint32_t w = r.original[k];
    if (k != frontier) {
      stage.push_back(w);
      continue;
    }
    place(w);
    stage.push_back(w);
    out.insert(out.end(), stage.begin(), stage.end());
    stage.clear();
    ++frontier;
  }
  place(static_cast<std::uint32_t>(whole.nodes.size()));  // sinks after the last kept node
  out.insert(out.end(), stage.begin(), stage.end());
  return out;
}

}  // namespace remat::sim
