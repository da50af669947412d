// One simulator run as dtr_sim reports it: a replay under a heuristic, policy and budget, set
// against the program's baseline (its unbudgeted replay under the same policy and cost model),
// with the thrash limit applied.  Usage: auto base = baseline(p, opts); auto row = run(p, base,
// opts, b);
#pragma once
#include <optional>
#include <string>

#include "dtr/config.h"
#include "sim/replay.h"

namespace remat::sim {

struct Baseline {
  double compute = 0;
  std::size_t peak_bytes = 0;
};

struct RunOptions {
  Heuristic heuristic = Heuristic::DtrEq;
  DeallocPolicy policy = DeallocPolicy::EagerEvict;
  CostModel cost = CostModel::Time;
  std::uint64_t seed = 0;
  std::size_t sample = 0;
  double thrash_limit = 2;  // <= 0: no limit
  bool segments = false;    // ReplayOptions::segments: a GPU's segment allocator
  ReplayOptions::PrototypeRules prototype;
  bool record_schedule = false;  // ReplayOptions::record_schedule
  bool swap = false;             // ReplayOptions::swap
  double swap_cost_per_byte = 0;
  bool swap_priced = false;
};
// "all", "none", or a comma-separated list of exact-sizes, full-scan, compute-clock,
// keep-stamp, single-victim, keep-released, stamp-first; "all-but:RULE" for every rule but one.
ReplayOptions::PrototypeRules prototype_rules_from(const std::string& text);

struct RunRow {
  std::optional<double> budget_fraction;  // of the baseline's peak; none when unbudgeted
  std::optional<std::size_t> budget_bytes;
  ReplayResult result;
  std::optional<double> overhead;  // compute / baseline compute; only for status ok
};

// Throws remat::Error when the cost model has nothing to count (a log without FLOPS or BYTES).
Baseline baseline(const Program& program, const RunOptions& options);
RunRow run(const Program& program, const Baseline& base, const RunOptions& options,
           const BudgetSpec& budget);

}  // namespace remat::sim
