// Chen et al. (2016), "Training Deep Nets with Sublinear Memory Cost": keep every k-th
// activation of a chain and recompute each segment once when the backward first reads it.
// The shape accepted is the one dtr_chain records:
//   forward  nodes 0..F-1, each with one result; node 0 reads only constants, node i reads node
//            i-1's result (plus constants);
//   the rest nodes after it (the backward), each reading at most one forward result, plus
//            constants and results of rest nodes; together they read every forward result but
//            the last, in non-increasing order of position.  F >= 2 when there is a rest.
// The segment size k is the one with the least compute whose schedule fits the budget (k = 1
// keeps everything; near a budget of 2 sqrt(F) tensors it is about sqrt(F)); the top segment
// may stay from the forward instead of being recomputed, whichever fits.
#include <optional>

#include "sim/chain_shape.h"
#include "sim/optimal.h"

namespace remat::sim {
namespace {

std::vector<std::uint32_t> segments(const ChainShape& c, std::size_t k, bool keep_top) {
  std::vector<std::uint32_t> steps;
  for (std::size_t i = 0; i < c.forward; ++i) steps.push_back(static_cast<std::uint32_t>(i));
  // Node i's result is activation i+1; activation s*k starts segment s (activation 0 is the
  // chain's input) and is its checkpoint.
  auto segment = [&](std::size_t node) { return (node + 1) / k; };
  std::optional<std::size_t> top;
  std::vector<char> done(c.forward / k + 2, 0);
  for (std::size_t r = 0; r < c.reads.size(); ++r) {
    if (const std::int32_t read = c.reads[r]; read >= 0) {
      const auto i = static_cast<std::size_t>(read);
      const std::size_t s = segment(i);
      if (!top) top = s;
      const bool checkpoint = (i + 1) % k == 0;
      if (!checkpoint && !done[s] && !(keep_top && s == *top)) {
        for (std::size_t j = s * k; j <= i; ++j) steps.push_back(static_cast<std::uint32_t>(j));
      }
      done[s] = 1;
    }
    steps.push_back(static_cast<std::uint32_t>(c.forward + r));
  }
  return steps;
}

}  // namespace

std::optional<std::vector<std::uint32_t>> chen_schedule(const OpGraph& graph,
                                                        std::size_t budget_bytes) {
  const auto shape = chain_shape(graph);
  if (!shape) return std::nullopt;
  std::optional<std::vector<std::uint32_t>> best;
  ScheduleCost best_cost;
  for (std::size_t k = 1; k <= shape->forward; ++k)
    for (bool keep_top : {true, false})
      keep_cheaper(graph, budget_bytes, segments(*shape, k, keep_top), best, best_cost);
  return best;
}

std::optional<double> chen_sqrt_compute(const Program& program, std::size_t budget_bytes,
                                        CostModel cost) {
  return chain_schedule_compute(program, budget_bytes, cost, chen_schedule);
}

}  // namespace remat::sim
