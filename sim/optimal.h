// Reference points for the simulator's heuristics on small graphs: the minimum total compute
// under a budget (a Checkmate-style MIP solved by CBC) and Chen et al.'s sqrt(n) segments on
// chains.  docs/simulator.md ("Optimal reference") states the model and its assumptions.
// Usage: auto r = optimal_compute(program, 64 << 10, CostModel::Unit, 30); if (r.status == ...)
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "dtr/config.h"
#include "sim/op_graph.h"
#include "sim/program.h"

namespace remat::sim {

struct OptimalResult {
  enum class Status { Optimal, TimeLimit, Infeasible, TooLarge };
  Status status;
  // Optimal: the minimum.  TimeLimit: the best schedule found (infinity when none was), with
  // lower_bound the solver's proven bound; the true minimum lies between them.
  double compute = 0;
  double lower_bound = 0;
  double seconds = 0;  // wall time spent building and solving
};

// Programs with more nodes that create something than this are answered TooLarge (sinks, the
// ACCESS, PIN and in-place writes, do not count: the MIP leaves them out, sim/sinks.h).
inline constexpr std::size_t kMaxOptimalCalls = 400;

// Minimum total compute (original + recomputation, in the units of `cost`) of `program` with
// resident bytes <= budget_bytes (constants included), Checkmate-style MIP solved by CBC.
// `starts`: schedules to start CBC from besides its own quick ones (a heuristic's replay,
// ReplayResult::schedule_lines: input lines in execution order); those that do not fit the
// budget or the graph's rules are skipped.
OptimalResult optimal_compute(const Program& program, std::size_t budget_bytes, CostModel cost,
                              double time_limit_seconds,
                              const std::vector<std::vector<std::size_t>>& starts = {});

// The same on a built graph, also returning the best schedule found: node ids in execution
// order (empty when none), which play_schedule replays within the budget.
struct OptimalSchedule {
  OptimalResult result;
  std::vector<std::uint32_t> steps;
};
OptimalSchedule optimal_schedule(const OpGraph& graph, std::size_t budget_bytes,
                                 double time_limit_seconds,
                                 const std::vector<std::vector<std::uint32_t>>& starts = {});

// Chen et al.'s sqrt(n) segment schedule for a linear chain; nullopt when the program is not a
// chain or does not fit.
std::optional<double> chen_sqrt_compute(const Program& program, std::size_t budget_bytes,
                                        CostModel cost);

// The schedule behind chen_sqrt_compute: node ids in execution order, or nullopt.
std::optional<std::vector<std::uint32_t>> chen_schedule(const OpGraph& graph,
                                                        std::size_t budget_bytes);

// Binomial checkpointing (Griewank's revolve) on a chain of equal activations read once each in
// reverse (dtr_chain's shape): the least compute of any schedule that keeps forward steps in
// order and recomputes from checkpoints, found by dynamic programming for chains of any length
// (the tests check it equals the MIP optimum where CBC proves one); nullopt for other shapes or
// when nothing fits.
std::optional<double> revolve_compute(const Program& program, std::size_t budget_bytes,
                                      CostModel cost);
std::optional<std::vector<std::uint32_t>> revolve_schedule(const OpGraph& graph,
                                                           std::size_t budget_bytes);

// The program examples/dtr_chain records with --trace: constant x, n unit-cost `chain` calls of
// `tensor_bytes` each, a `full` seed, n `chain_grad` calls reading the activations in reverse,
// with the example's releases, pin and access; each call costs 1 in every cost model.
Program chain_program(std::size_t n, std::size_t tensor_bytes);

}  // namespace remat::sim
