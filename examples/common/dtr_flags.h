// The DTR flags every example shares, parsed by one parser: --budget (300MiB, 1.5GB, 123456,
// a fraction such as 0.4, or none), --heuristic, --policy, --dtr-cost, --dtr-seed, --swap,
// --swap-bandwidth, --trace.
// A fractional budget is a fraction of the unbudgeted steady-state peak: the pool runs the first
// two steps without a budget and measures the second (Pool::set_budget_fraction).  Usage:
//   DtrFlags dtr; dtr.add_to(app); CLI11_PARSE(app, argc, argv); dtr.configure(pool);
//   for (step...) { ...; dtr.after_step(pool); }
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "dtr/config.h"
#include "dtr/pool.h"
#include "examples/common/flag_checks.h"

namespace remat::examples {

struct DtrFlags {
  std::string budget = "none";
  std::string heuristic = "dtr-eq";
  std::string policy = "eager-evict";
  std::string cost = "time";
  std::string trace;
  std::uint64_t seed = 0;
  bool swap = false;
  std::optional<double> swap_bandwidth;  // GB/s: prices swaps against evictions

  // The step a fractional budget is measured on, unbudgeted (Pool::set_budget_fraction): the
  // first also creates the optimizer's state, so the second is the first steady one.
  static constexpr int kMeasureStep = 2;

  BudgetSpec spec;
  std::optional<std::size_t>
      unbudgeted_peak;  // of the measured step (or the first, without a budget)
  int steps_seen = 0;

  void add_to(CLI::App& app) {
    auto valid = [](auto parse) {
      return [parse](const std::string& s) {
        try {
          parse(s);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      };
    };
    app.add_option("--budget", budget,
                   "memory budget: bytes (300MiB, 1.5GB, 123456), a fraction of the unbudgeted "
                   "peak (0.4), or none")
        ->check(valid([](const std::string& s) { parse_budget(s); }));
    app.add_option("--heuristic", heuristic,
                   "eviction heuristic: dtr, dtr-eq, dtr-local, lru, largest, msps, estar, random, "
                   "dtr-next")
        ->check(valid([](const std::string& s) { heuristic_from_name(s); }));
    app.add_option("--policy", policy, "deallocation policy: eager-evict, banish, ignore")
        ->check(valid([](const std::string& s) { policy_from_name(s); }));
    app.add_option("--dtr-cost", cost, "cost model of a recorded op: time, flops, bytes, unit")
        ->check(valid([](const std::string& s) { cost_model_from_name(s); }));
    app.add_option("--dtr-seed", seed, "seed for candidate sampling and the random heuristic")
        ->check(whole_in_range<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max()));
    auto* swap_flag = app.add_flag(
        "--swap", swap,
        "before evicting, move values that cannot be recomputed (parameters, optimizer state, "
        "waiting gradients) to host memory");
    app.add_option("--swap-bandwidth", swap_bandwidth,
                   "GB/s a copy to or from host memory moves: swapping then competes with "
                   "eviction, scored by the heuristic at the cost of its two copies, instead of "
                   "coming first (needs --swap and --dtr-cost time)")
        ->check(real_in_range(0, false, 1e6, "a positive number of GB/s up to 1e6"))
        ->needs(swap_flag);
    app.add_option("--trace", trace,
                   "write a JSON-lines trace of the training steps to this file (the final "
                   "evaluation is not traced)");
  }

  // Configures the pool; an absolute budget applies at once, a fraction after the first step.
  void configure(Pool& pool) {
    spec = parse_budget(budget);
    DtrConfig cfg;
    cfg.heuristic = heuristic_from_name(heuristic);
    cfg.policy = policy_from_name(policy);
    cfg.cost = cost_model_from_name(cost);
    cfg.seed = seed;
    cfg.swap = swap;
    if (swap_bandwidth)
      cfg.swap_cost_per_byte = swap_cost_per_byte(*swap_bandwidth, cfg.cost, "--dtr-cost");
    cfg.budget = spec.bytes;
    pool.configure(cfg);
    if (spec.fraction) pool.set_budget_fraction(*spec.fraction, kMeasureStep);
    if (!trace.empty()) pool.start_trace(trace);
    pool.reset_stats();
  }

  // Call after the last training step: the trace covers the training, not the evaluation after
  // it (replayed, an evaluation's calls count in the step's compute: a trace of six ResNet-20
  // steps that went on through the test set held 8x their kernel time).
  void end_training(Pool& pool) {
    if (!trace.empty()) pool.stop_trace();
  }

  // Call after every training step.
  void after_step(Pool& pool) {
    if (++steps_seen == 1 && spec.none()) unbudgeted_peak = pool.stats().peak_resident_bytes;
    if (const auto bytes = pool.end_step()) {
      unbudgeted_peak = pool.measured_peak();
      pool.reset_stats();  // what is reported from here on ran under the budget
      std::printf("budget: %.2f of the unbudgeted peak of step %d, %.1f MiB = %.1f MiB\n",
                  *spec.fraction, steps_seen, *unbudgeted_peak / 1048576.0, *bytes / 1048576.0);
    }
  }
};

}  // namespace remat::examples
