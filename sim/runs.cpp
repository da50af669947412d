#include "sim/runs.h"

#include "core/error.h"

namespace remat::sim {
namespace {

ReplayOptions replay_options(const RunOptions& o) {
  ReplayOptions r;
  r.heuristic = o.heuristic;
  r.policy = o.policy;
  r.cost = o.cost;
  r.seed = o.seed;
  r.sample = o.sample;
  r.segments = o.segments;
  r.prototype = o.prototype;
  r.record_schedule = o.record_schedule;
  r.swap = o.swap;
  r.swap_cost_per_byte = o.swap_cost_per_byte;
  r.swap_priced = o.swap_priced;
  return r;
}

}  // namespace

ReplayOptions::PrototypeRules prototype_rules_from(const std::string& text) {
  using Rules = ReplayOptions::PrototypeRules;
  static const std::pair<std::string_view, bool Rules::*> kRules[] = {
      {"exact-sizes", &Rules::exact_sizes},     {"full-scan", &Rules::full_scan},
      {"compute-clock", &Rules::compute_clock}, {"keep-stamp", &Rules::keep_stamp_on_remat},
      {"single-victim", &Rules::single_victim}, {"keep-released", &Rules::keep_released},
      {"stamp-first", &Rules::stamp_first}};
  auto rule = [&](std::string_view name) {
    for (const auto& [n, member] : kRules)
      if (n == name) return member;
    REMAT_THROW(
        "unknown prototype rule '{}' (expected all, none, all-but:RULE or a list of "
        "exact-sizes, full-scan, compute-clock, keep-stamp, single-victim, keep-released, "
        "stamp-first)",
        name);
  };
  if (text == "all") return Rules::all();
  if (text == "none" || text.empty()) return {};
  if (text.starts_with("all-but:")) {
    Rules r = Rules::all();
    r.*rule(std::string_view(text).substr(8)) = false;
    return r;
  }
  Rules r;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find(',', pos), text.size());
    r.*rule(std::string_view(text).substr(pos, end - pos)) = true;
    pos = end + 1;
  }
  return r;
}

Baseline baseline(const Program& program, const RunOptions& o) {
  REMAT_CHECK(
      o.cost == CostModel::Time || o.cost == CostModel::Unit || total_cost(program, o.cost) > 0,
      "{}: the {} cost model needs {} fields, which this input does not have", program.source,
      cost_model_name(o.cost), o.cost == CostModel::Flops ? "FLOPS" : "BYTES");
  const ReplayResult res = replay(program, replay_options(o));
  REMAT_CHECK(res.status == ReplayStatus::Ok, "{}: the unbudgeted replay did not finish",
              program.source);
  REMAT_CHECK(res.compute > 0, "{}: the program computes nothing under the {} cost model",
              program.source, cost_model_name(o.cost));
  return {res.compute, res.peak_bytes};
}

RunRow run(const Program& program, const Baseline& base, const RunOptions& o,
           const BudgetSpec& budget) {
  RunRow row;
  row.budget_bytes = budget.resolve(base.peak_bytes);
  if (row.budget_bytes && base.peak_bytes > 0)
    row.budget_fraction = budget.fraction ? *budget.fraction
                                          : static_cast<double>(*row.budget_bytes) /
                                                static_cast<double>(base.peak_bytes);
  ReplayOptions r = replay_options(o);
  r.budget = row.budget_bytes;
  if (o.thrash_limit > 0) r.compute_limit = o.thrash_limit * base.compute;
  row.result = replay(program, r);
  if (row.result.status == ReplayStatus::Ok) row.overhead = row.result.compute / base.compute;
  return row;
}

}  // namespace remat::sim
