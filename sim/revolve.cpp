// Binomial checkpointing (Griewank's "revolve") on a chain: reversing a segment of l steps
// whose first activation is resident, with c free tensor slots, costs
//   R(1, c) = 0                                  (c >= 1: the step's gradient)
//   R(l, c) = min_j  j + R(l - j, c - 1) + R(j, c)
// recomputations: advance j steps (two slots in flight, one when j = 1), keep activation j,
// reverse the top part with one slot less, then the bottom part with the slot back.  The first
// sweep is the original forward, so its advances are free (and, before any gradient exists,
// need one slot):  T(1, c) = 0,  T(l, c) = min_j T(l - j, c - 1) + R(j, c).
// Slots: the budget less the held constants, less one for the incoming gradient, in units of
// the (equal) activation size.  The schedule is replayed with play_schedule, which has the
// final word on memory and compute; neighbouring slot counts are tried too, in case the
// accounting here is off by one somewhere a program differs from dtr_chain's.
#include <algorithm>
#include <limits>
#include <optional>

#include "sim/chain_shape.h"
#include "sim/optimal.h"

namespace remat::sim {
namespace {

constexpr std::int64_t kInfinite = std::numeric_limits<std::int64_t>::max() / 4;

class Revolve {
 public:
  Revolve(std::size_t steps, std::size_t slots)
      : l_max_(steps),
        c_max_(slots),
        reverse_(table()),
        sweep_(table()),
        reverse_split_(table()),
        sweep_split_(table()) {
    for (std::size_t c = 0; c <= c_max_; ++c) {
      at(reverse_, 1, c) = at(sweep_, 1, c) = c >= 1 ? 0 : kInfinite;
    }
    for (std::size_t l = 2; l <= l_max_; ++l) {
      for (std::size_t c = 0; c <= c_max_; ++c) {
        std::int64_t best_r = kInfinite, best_t = kInfinite;
        std::size_t split_r = 0, split_t = 0;
        for (std::size_t j = 1; j < l && c >= 1; ++j) {
          const std::int64_t bottom = at(reverse_, j, c);
          if (bottom >= kInfinite) continue;
          if (c >= (j >= 2 ? 2u : 1u)) {
            const std::int64_t r =
                static_cast<std::int64_t>(j) + at(reverse_, l - j, c - 1) + bottom;
            if (r < best_r) best_r = r, split_r = j;
          }
          const std::int64_t t = at(sweep_, l - j, c - 1) + bottom;
          if (t < best_t) best_t = t, split_t = j;
        }
        at(reverse_, l, c) = std::min(best_r, kInfinite);
        at(sweep_, l, c) = std::min(best_t, kInfinite);
        at(reverse_split_, l, c) = split_r;
        at(sweep_split_, l, c) = split_t;
      }
    }
  }

  bool feasible() const { return at(sweep_, l_max_, c_max_) < kInfinite; }

  // Emits the schedule: forward nodes by index; backward(i) emits the rest nodes up to the one
  // that reads activation i.
  template <class Forward, class Backward>
  void emit(Forward&& forward, Backward&& backward) const {
    walk(0, l_max_, c_max_, true, forward, backward);
  }

 private:
  std::vector<std::int64_t> table() const {
    return std::vector<std::int64_t>((l_max_ + 1) * (c_max_ + 1), 0);
  }
  std::int64_t& at(std::vector<std::int64_t>& t, std::size_t l, std::size_t c) const {
    return t[l * (c_max_ + 1) + c];
  }
  std::int64_t at(const std::vector<std::int64_t>& t, std::size_t l, std::size_t c) const {
    return t[l * (c_max_ + 1) + c];
  }
  std::size_t split(const std::vector<std::int64_t>& t, std::size_t l, std::size_t c) const {
    return static_cast<std::size_t>(at(t, l, c));
  }

  // Reverses the segment of l steps from activation a with c slots; `first` while it is part
  // of the original forward sweep, whose last step computes the chain's output.
  template <class Forward, class Backward>
  void walk(std::size_t a, std::size_t l, std::size_t c, bool first, Forward& forward,
            Backward& backward) const {
    if (l == 1) {
      if (first) forward(a);  // the chain's last call: its result is not read
      backward(a);
      return;
    }
    const std::size_t j = split(first ? sweep_split_ : reverse_split_, l, c);
    for (std::size_t k = a; k < a + j; ++k) forward(k);
    walk(a + j, l - j, c - 1, first, forward, backward);
    walk(a, j, c, false, forward, backward);
  }

  std::size_t l_max_, c_max_;
  std::vector<std::int64_t> reverse_, sweep_, reverse_split_, sweep_split_;
};

// The schedule for `slots`, or nullopt when the recursion finds none.
std::optional<std::vector<std::uint32_t>> schedule_with(const ChainShape& shape,
                                                        std::size_t slots) {
  const Revolve plan(shape.forward, slots);
  if (!plan.feasible()) return std::nullopt;
  std::vector<std::uint32_t> steps;
  std::size_t next_rest = 0;  // index into shape.reads
  auto forward = [&](std::size_t node) { steps.push_back(static_cast<std::uint32_t>(node)); };
  // Activation i is node i-1's result (activation 0, the input, is a constant): run the rest
  // nodes up to the one that reads it; for activation 0, all that remain.
  auto backward = [&](std::size_t activation) {
    while (next_rest < shape.reads.size()) {
      const std::int32_t read = shape.reads[next_rest];
      steps.push_back(static_cast<std::uint32_t>(shape.forward + next_rest));
      ++next_rest;
      if (activation > 0 && read == static_cast<std::int32_t>(activation) - 1) return;
    }
  };
  plan.emit(forward, backward);
  return steps;
}

// The activation size when activations are equal, equally costly and read exactly once each in
// reverse (dtr_chain's backward); otherwise nullopt.
std::optional<std::size_t> unit_bytes(const OpGraph& g, const ChainShape& shape) {
  if (shape.reads.empty() || shape.forward < 2) return std::nullopt;
  std::int32_t expected = static_cast<std::int32_t>(shape.forward) - 2;
  for (std::int32_t read : shape.reads) {
    if (read < 0) continue;
    if (read != expected) return std::nullopt;
    --expected;
  }
  if (expected != -1) return std::nullopt;
  const std::size_t unit = g.nodes[0].bytes;
  for (const auto& node : g.nodes)
    if (node.bytes != 0 && node.bytes != unit) return std::nullopt;
  // The recursion counts recomputed steps: exact only when every step costs the same.
  for (std::size_t i = 1; i < shape.forward; ++i)
    if (g.nodes[i].cost != g.nodes[0].cost) return std::nullopt;
  return unit > 0 ? std::optional<std::size_t>(unit) : std::nullopt;
}

}  // namespace

std::optional<std::vector<std::uint32_t>> revolve_schedule(const OpGraph& graph,
                                                           std::size_t budget_bytes) {
  const auto shape = chain_shape(graph);
  if (!shape) return std::nullopt;
  const auto unit = unit_bytes(graph, *shape);
  if (!unit) return std::nullopt;
  std::size_t held = 0;
  for (const auto& v : graph.values)
    if (v.producer == OpGraph::kNone) held += v.bytes;
  if (budget_bytes < held + 2 * *unit) return std::nullopt;
  const std::size_t slots = (budget_bytes - held) / *unit - 1;  // one for the incoming gradient
  std::optional<std::vector<std::uint32_t>> best;
  ScheduleCost best_cost;
  for (std::size_t s : {slots, slots + 1, slots > 0 ? slots - 1 : slots})
    if (auto steps = schedule_with(*shape, std::min(s, shape->forward + 1)))
      keep_cheaper(graph, budget_bytes, std::move(*steps), best, best_cost);
  return best;
}

std::optional<double> revolve_compute(const Program& program, std::size_t budget_bytes,
                                      CostModel cost) {
  return chain_schedule_compute(program, budget_bytes, cost, revolve_schedule);
}

}  // namespace remat::sim
