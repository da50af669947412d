// The simulator engine: replays a Program on a real remat::Pool (same budget logic,
// heuristics, policies and rematerialization) whose allocator holds no memory and whose
// producers run no kernel, only account the recorded cost.  Each event makes the pool calls the
// framework's dispatch path makes, in the same order, so a trace replays its run exactly.
// Usage: ReplayResult r = replay(program, {.budget = 64 << 20, .cost = CostModel::Unit});
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dtr/config.h"
#include "sim/program.h"

namespace remat::sim {

struct ReplayOptions {
  std::optional<std::size_t> budget;  // unlimited when empty
  Heuristic heuristic = Heuristic::DtrEq;
  DeallocPolicy policy = DeallocPolicy::EagerEvict;
  CostModel cost = CostModel::Time;
  std::uint64_t seed = 0;
  std::size_t sample = 0;  // DtrConfig::sample
  // The run stops as thrashing once its compute (original plus recomputation) exceeds this.
  std::optional<double> compute_limit;
  // Model a GPU's caching allocator: memory comes in segments split into blocks
  // (core/segment_allocator.h), and the budget counts what the segments hold, fragmentation
  // included.  Otherwise the CPU's exact-size cache.
  bool segments = false;
  // The DTR prototype's simulator's rules (docs/simulator.md), each on its own so their
  // effects can be told apart: exact sizes (no 64-byte rounding), a full scan of the
  // candidates, staleness on the compute clock, no access stamp on rematerialization, one
  // victim per search.
  struct PrototypeRules {
    bool exact_sizes = false;
    bool full_scan = false;
    bool compute_clock = false;
    bool keep_stamp_on_remat = false;
    bool single_victim = false;
    bool keep_released = false;
    bool stamp_first = false;
    static PrototypeRules all() { return {true, true, true, true, true, true, true}; }
  } prototype;
  // Keep the order of executions (ReplayResult::schedule_lines), for the optimum's MIP to
  // start from.
  bool record_schedule = false;
  // DtrConfig::swap: values that cannot be recomputed may move out of the budget.  Every byte
  // copied, out or back in, adds swap_cost_per_byte to the run's compute (under the time cost
  // model, one over the link's bandwidth in bytes per second: copies do not overlap compute).
  bool swap = false;
  double swap_cost_per_byte = 0;
  // The pool prices swaps at that cost (DtrConfig::swap_cost_per_byte) and weighs them against
  // evictions; otherwise it swaps before evicting.
  bool swap_priced = false;
};

enum class ReplayStatus : std::uint8_t { Ok, Thrash, Infeasible };
std::string_view status_name(ReplayStatus s);  // ok, thrash, infeasible

struct ReplayResult {
  ReplayStatus status = ReplayStatus::Ok;
  double compute = 0;          // original plus recomputation, in units of the cost model
  double recompute = 0;        // the recomputation part
  std::size_t peak_bytes = 0;  // resident bytes
  std::uint64_t calls = 0, executions = 0, evictions = 0, rematerializations = 0,
                metadata_accesses = 0, candidates_drawn = 0;
  std::uint64_t fragmentation_evictions = 0;  // victims chosen to join free blocks
  // The pool's own work in this replay, measured (wall clock, this CPU): choosing victims, and
  // its bookkeeping.  The simulator's event loop and accounting are not in it.
  double search_seconds = 0, bookkeeping_seconds = 0;
  std::uint64_t swap_outs = 0, swap_ins = 0;    // with ReplayOptions::swap
  std::size_t swap_bytes = 0;                   // copied, both ways
  double swap_cost = 0;                         // the part of compute they cost
  std::size_t fragmentation_at_peak_bytes = 0;  // held minus resident when resident peaks
  std::string message;                          // why an infeasible run stopped
  // With record_schedule: the input line of every call, mutation, pin and access in the order
  // they ran, rematerializations included (a static schedule, as play_schedule takes it once
  // lines become graph nodes).
  std::vector<std::size_t> schedule_lines;
};

// Throws remat::Error naming the input and line when an event cannot be replayed (not for
// OutOfBudget or thrashing, which are statuses).
// dtr-next learns step by step where the trace marks its steps' ends (Pool::end_step writes
// them), as the run did; otherwise from an unbudgeted replay of the same program, as if it were
// the previous training step.
ReplayResult replay(const Program& program, const ReplayOptions& options);
// Whether `program` marks the ends of training steps (ANNOTATE STEP_END lines).
bool marks_steps(const Program& program);
// A replay whose pool first learned `previous` (unbudgeted) as its last step: dtr-next's
// predictions come from it (a dynamic model's earlier step, e.g. another tree).
ReplayResult replay_after(const Program& previous, const Program& program,
                          const ReplayOptions& options);

}  // namespace remat::sim
