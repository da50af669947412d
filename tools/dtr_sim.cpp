// dtr_sim: the offline DTR simulator.  Replays framework traces (--trace) and the research
// prototype's logs under any heuristic, deallocation policy and budget on the framework's own
// pool, without running a kernel; reports overhead, peak, evictions and rematerializations as a
// table or JSON lines, sweeps budgets into a CSV and a PNG, and compares with the optimum.
// Usage: dtr_sim --heuristic all --budget 0.2,0.5 ../shared/data/dtr-prototype-logs/logs.zip
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "examples/common/flag_checks.h"
#include "sim/budgets.h"
#include "sim/lower_bound.h"
#include "sim/optimal.h"
#include "sim/plot.h"
#include "sim/read.h"
#include "sim/runs.h"

using namespace remat;
using namespace remat::sim;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Flags {
  std::vector<std::string> inputs;
  std::string heuristics = "dtr-eq";
  std::string policy = "eager-evict";
  std::string budgets = "0.1:1.0:0.1";
  std::string cost = "time";
  double thrash_limit = 2;
  std::uint64_t seed = 0;
  std::uint64_t seeds = 1;
  std::size_t sample = 0;
  bool json = false;
  bool segments = false;
  bool swap = false;
  double swap_bandwidth = 12;  // GB/s: PCIe 3.0 x16 from pinned host memory
  bool swap_priced = false;
  std::string prototype = "none";
  bool sweep = false;
  std::string out = "dtr_sim";
  bool optimal = false;
  bool lower_bound = false;
  double time_limit = 60;
};

std::vector<Heuristic> heuristics_from(const std::string& text) {
  if (text == "all") return all_heuristics();
  std::vector<Heuristic> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find(',', pos), text.size());
    std::string name = text.substr(pos, end - pos);
    std::erase(name, ' ');
    out.push_back(heuristic_from_name(name));
    pos = end + 1;
  }
  return out;
}

std::string human_bytes(std::size_t b) {
  const double v = static_cast<double>(b);
  if (v >= 1 << 30) return fmt::format("{:.2f} GiB", v / (1 << 30));
  if (v >= 1 << 20) return fmt::format("{:.1f} MiB", v / (1 << 20));
  if (v >= 1 << 10) return fmt::format("{:.1f} KiB", v / (1 << 10));
  return fmt::format("{} B", b);
}

// A file-name-safe short name of a program: the member's file name without its extension.
std::string stem_of(const std::string& source) {
  std::string s =
      std::filesystem::path(
          source.substr(source.rfind(':') == std::string::npos ? 0 : source.rfind(':') + 1))
          .stem()
          .string();
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return s;
}

class Reporter {
 public:
  explicit Reporter(const Flags& f) : f_(f) {}

  void program(const Program& p, const Baseline& base) {
    if (f_.json) return;
    std::printf("\n%s: %zu tensors, %zu events; unbudgeted: peak %s, compute %.6g (%s cost)\n",
                p.source.c_str(), p.tensors.size(), p.events.size(),
                human_bytes(base.peak_bytes).c_str(), base.compute, f_.cost.c_str());
    std::printf("%-10s %-12s %12s %8s %-10s %9s %12s %10s %10s %12s%s%s%s%s\n", "heuristic",
                "policy", "budget", "fraction", "status", "overhead", "peak", "evictions", "remats",
                "metadata", f_.optimal ? "  vs-optimal" : "", f_.segments ? "  frag@peak" : "",
                f_.swap ? "      swapped  swap-share" : "",
                f_.seeds > 1 ? "  (means over seeds)   min-ovhd   max-ovhd" : "");
  }

  // One run; with several seeds, the JSON row names its seed and the table waits for summary().
  void row(const Program& p, const std::string& heuristic, const RunRow& r,
           std::optional<double> vs_optimal, std::uint64_t seed) {
    const ReplayResult& x = r.result;
    if (f_.seeds > 1 && !f_.json) return;
    if (f_.json) {
      nlohmann::json j = {
          {"input", p.source},
          {"heuristic", heuristic},
          {"policy", f_.policy},
          {"budget_fraction",
           r.budget_fraction ? nlohmann::json(*r.budget_fraction) : nlohmann::json()},
          {"budget_bytes", r.budget_bytes ? nlohmann::json(*r.budget_bytes) : nlohmann::json()},
          {"status", status_name(x.status)},
          {"overhead", r.overhead ? nlohmann::json(*r.overhead) : nlohmann::json()},
          {"peak_bytes", x.peak_bytes},
          {"evictions", x.evictions},
          {"rematerializations", x.rematerializations},
          {"metadata_accesses", x.metadata_accesses},
          {"candidates_drawn", x.candidates_drawn},
          {"search_seconds", x.search_seconds},
          {"bookkeeping_seconds", x.bookkeeping_seconds},
          {"cost", f_.cost},
          {"compute", x.compute}};
      if (f_.segments) {
        j["fragmentation_at_peak_bytes"] = x.fragmentation_at_peak_bytes;
        j["fragmentation_evictions"] = x.fragmentation_evictions;
      }
      if (f_.swap) {
        j["swap_outs"] = x.swap_outs;
        j["swap_ins"] = x.swap_ins;
        j["swap_bytes"] = x.swap_bytes;
        j["swap_cost"] = x.swap_cost;
      }
      if (f_.optimal) j["vs_optimal"] = vs_optimal ? nlohmann::json(*vs_optimal) : nlohmann::json();
      if (f_.seeds > 1) j["seed"] = seed;
      if (!x.message.empty()) j["message"] = x.message;  // why a run was infeasible
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf(
        "%-10s %-12s %12s %8s %-10s %9s %12s %10llu %10llu %12llu%s%s%s\n", heuristic.c_str(),
        f_.policy.c_str(), r.budget_bytes ? human_bytes(*r.budget_bytes).c_str() : "none",
        r.budget_fraction ? fmt::format("{:.3f}", *r.budget_fraction).c_str() : "-",
        std::string(status_name(x.status)).c_str(),
        r.overhead ? fmt::format("{:.4f}", *r.overhead).c_str() : "-",
        human_bytes(x.peak_bytes).c_str(), static_cast<unsigned long long>(x.evictions),
        static_cast<unsigned long long>(x.rematerializations),
        static_cast<unsigned long long>(x.metadata_accesses),
        f_.optimal
            ? fmt::format("  {:>10}", vs_optimal ? fmt::format("{:.4f}", *vs_optimal) : "-").c_str()
            : "",
        f_.segments ? fmt::format("  {:>11}", human_bytes(x.fragmentation_at_peak_bytes)).c_str()
                    : "",
        // Copied bytes both ways, and the copies' share of the run's compute.
        f_.swap ? fmt::format("  {:>11}  {:>10.4f}", human_bytes(x.swap_bytes),
                              x.compute > 0 ? x.swap_cost / x.compute : 0.0)
                      .c_str()
                : "");
  }

  // A heuristic's runs under several seeds, as one table row: the status when all ended alike
  // (else how many ended ok), the means over those that did, and their overheads' spread.
  void summary(const std::string& heuristic, const std::vector<RunRow>& runs,
               std::optional<double> best) {
    if (f_.json || f_.seeds <= 1) return;
    std::vector<const RunRow*> ok;
    for (const RunRow& r : runs)
      if (r.overhead) ok.push_back(&r);
    const RunRow& first = runs.front();
    std::string status(status_name(first.result.status));
    for (const RunRow& r : runs)
      if (r.result.status != first.result.status)
        status = fmt::format("{}/{} ok", ok.size(), runs.size());
    auto mean = [&](auto field) {
      double sum = 0;
      for (const RunRow* r : ok) sum += static_cast<double>(field(*r));
      return sum / static_cast<double>(ok.size());
    };
    std::string overhead = "-", peak = "-", evictions = "-", remats = "-", metadata = "-",
                vs_optimal = "-", frag, swapped, lo = "-", hi = "-";
    if (!ok.empty()) {
      auto [least, most] = std::minmax_element(
          ok.begin(), ok.end(), [](auto a, auto b) { return *a->overhead < *b->overhead; });
      overhead = fmt::format("{:.4f}", mean([](const RunRow& r) { return *r.overhead; }));
      lo = fmt::format("{:.4f}", *(*least)->overhead);
      hi = fmt::format("{:.4f}", *(*most)->overhead);
      peak = human_bytes(
          static_cast<std::size_t>(mean([](const RunRow& r) { return r.result.peak_bytes; })));
      evictions = fmt::format("{:.1f}", mean([](const RunRow& r) { return r.result.evictions; }));
      remats =
          fmt::format("{:.1f}", mean([](const RunRow& r) { return r.result.rematerializations; }));
      metadata =
          fmt::format("{:.0f}", mean([](const RunRow& r) { return r.result.metadata_accesses; }));
      if (best && *best > 0)
        vs_optimal =
            fmt::format("{:.4f}", mean([](const RunRow& r) { return r.result.compute; }) / *best);
      frag = human_bytes(static_cast<std::size_t>(
          mean([](const RunRow& r) { return r.result.fragmentation_at_peak_bytes; })));
      swapped = fmt::format(
          "{:>11}  {:>10.4f}",
          human_bytes(
              static_cast<std::size_t>(mean([](const RunRow& r) { return r.result.swap_bytes; }))),
          mean([](const RunRow& r) {
            return r.result.compute > 0 ? r.result.swap_cost / r.result.compute : 0.0;
          }));
    }
    std::printf("%-10s %-12s %12s %8s %-10s %9s %12s %10s %10s %12s%s%s%s  %19s %10s %10s\n",
                heuristic.c_str(), f_.policy.c_str(),
                first.budget_bytes ? human_bytes(*first.budget_bytes).c_str() : "none",
                first.budget_fraction ? fmt::format("{:.3f}", *first.budget_fraction).c_str() : "-",
                status.c_str(), overhead.c_str(), peak.c_str(), evictions.c_str(), remats.c_str(),
                metadata.c_str(), f_.optimal ? fmt::format("  {:>10}", vs_optimal).c_str() : "",
                f_.segments ? fmt::format("  {:>11}", frag).c_str() : "",
                f_.swap ? fmt::format("  {:>23}", swapped).c_str() : "", "", lo.c_str(),
                hi.c_str());
  }

  // The optimum and Chen's schedule at one budget, as rows beside the heuristics.
  void reference(const Program& p, const std::string& name, const RunRow& r,
                 const std::string& note) {
    if (f_.json) {
      nlohmann::json j = {
          {"input", p.source},
          {"heuristic", name},
          {"policy", f_.policy},
          {"budget_fraction",
           r.budget_fraction ? nlohmann::json(*r.budget_fraction) : nlohmann::json()},
          {"budget_bytes", r.budget_bytes ? nlohmann::json(*r.budget_bytes) : nlohmann::json()},
          {"status", status_name(r.result.status)},
          {"overhead", r.overhead ? nlohmann::json(*r.overhead) : nlohmann::json()},
          {"peak_bytes", nullptr},
          {"evictions", nullptr},
          {"rematerializations", nullptr},
          {"metadata_accesses", nullptr},
          {"candidates_drawn", nullptr},
          {"search_seconds", nullptr},
          {"bookkeeping_seconds", nullptr},
          {"cost", f_.cost},
          {"compute", r.result.compute},
          {"note", note}};
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("%-10s %-12s %12s %8s %-10s %9s   %s\n", name.c_str(), f_.policy.c_str(),
                r.budget_bytes ? human_bytes(*r.budget_bytes).c_str() : "none",
                r.budget_fraction ? fmt::format("{:.3f}", *r.budget_fraction).c_str() : "-",
                std::string(status_name(r.result.status)).c_str(),
                r.overhead ? fmt::format("{:.4f}", *r.overhead).c_str() : "-", note.c_str());
  }

 private:
  const Flags& f_;
};

// Chen's sqrt(n) segments at one budget, as a row, when the program is a chain they fit.
void chen_row(const Program& p, const RunRow& at, const Baseline& base, CostModel cost,
              Reporter& out) {
  if (const auto chen = chen_sqrt_compute(p, *at.budget_bytes, cost)) {
    RunRow c = at;
    c.result = {};
    c.result.compute = *chen;
    c.overhead = *chen / base.compute;
    out.reference(p, "chen-sqrt", c, "Chen et al. sqrt(n) segments");
  }
}

// The optimum at one budget (binomial checkpointing on a chain, else the MIP): compute and a
// note on how it was found.
std::optional<double> optimum(const Program& p, const Baseline& base,
                              const std::vector<std::pair<std::string, RunRow>>& runs,
                              const Flags& f, CostModel cost, Reporter& out) {
  const RunRow& at = runs.front().second;
  RunRow row = at;
  row.result = {};
  row.overhead.reset();
  if (!at.budget_bytes) return std::nullopt;
  if (const auto exact = revolve_compute(p, *at.budget_bytes, cost)) {
    // A chain: binomial checkpointing is the optimum at any length, the MIP unnecessary.
    row.result.status = ReplayStatus::Ok;
    row.result.compute = *exact;
    row.overhead = *exact / base.compute;
    out.reference(p, "optimal", row, "binomial checkpointing (revolve): exact on a chain");
    chen_row(p, at, base, cost, out);
    return exact;
  }
  // CBC starts from the best of its own quick schedules and the heuristics' replays.
  std::vector<std::vector<std::size_t>> starts;
  for (const auto& [name, r] : runs)
    if (r.result.status == ReplayStatus::Ok) starts.push_back(r.result.schedule_lines);
  const OptimalResult o = optimal_compute(p, *at.budget_bytes, cost, f.time_limit, starts);
  std::string note;
  std::optional<double> best;
  switch (o.status) {
    case OptimalResult::Status::Optimal:
      best = o.compute;
      note = fmt::format("MIP optimum ({:.1f} s)", o.seconds);
      break;
    case OptimalResult::Status::TimeLimit:
      if (std::isfinite(o.compute)) best = o.compute;
      note = fmt::format("time limit: best found, optimum >= {:.6g} ({:.4f}x)", o.lower_bound,
                         o.lower_bound / base.compute);
      break;
    case OptimalResult::Status::Infeasible:
      note = "MIP infeasible at this budget";
      break;
    case OptimalResult::Status::TooLarge:
      note = fmt::format("too large for the MIP (over {} nodes that create something)",
                         kMaxOptimalCalls);
      break;
  }
  row.result.status = best ? ReplayStatus::Ok : ReplayStatus::Infeasible;
  row.result.compute = best.value_or(0);
  if (best) row.overhead = *best / base.compute;
  out.reference(p, "optimal", row, note);
  chen_row(p, at, base, cost, out);
  return best;
}

// The covering LP's bound at one budget (sim/lower_bound.h), as a row: no schedule's overhead
// is below it.  Returns that overhead (none when no schedule fits).
std::optional<double> lower_bound_row(const Program& p, const OpGraph& graph, const Baseline& base,
                                      const RunRow& at, const Flags& f, Reporter& out) {
  if (!at.budget_bytes) return std::nullopt;
  const RecomputeBound b = recompute_lower_bound(graph, *at.budget_bytes, f.time_limit);
  RunRow row = at;
  row.result = {};
  row.overhead.reset();
  std::string note;
  switch (b.status) {
    case RecomputeBound::Status::Bound:
    case RecomputeBound::Status::TimeLimit:
      row.result.status = ReplayStatus::Ok;
      row.result.compute = base.compute + b.recompute;
      row.overhead = row.result.compute / base.compute;
      note = fmt::format("{} ({} binding stages, {} absences, {:.1f} s)",
                         b.status == RecomputeBound::Status::Bound
                             ? "LP lower bound: no schedule recomputes less"
                             : "LP time limit: the best single stage's bound",
                         b.binding_stages, b.absences, b.seconds);
      break;
    case RecomputeBound::Status::Infeasible:
      row.result.status = ReplayStatus::Infeasible;
      note = fmt::format("no schedule fits: stage {} (line {}) must hold more than the budget",
                         b.stage,
                         static_cast<std::size_t>(b.stage) < graph.nodes.size()
                             ? graph.nodes[static_cast<std::size_t>(b.stage)].line
                             : 0);
      break;
  }
  out.reference(p, "bound", row, note);
  return row.overhead;
}

// "chain:N": dtr_chain's program of N calls with 1 MiB tensors, built in place; else a file.
std::vector<Program> read_input(const std::string& input) {
  if (input.rfind("chain:", 0) != 0) return read_programs(input);
  std::size_t n = 0;
  const std::string count = input.substr(6);
  const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
  if (ec != std::errc() || end != count.data() + count.size() || n < 1 || n > 100000)
    throw Error(fmt::format("{}: expected chain:N with N from 1 to 100000", input));
  Program p = chain_program(n, std::size_t{1} << 20);
  p.source = input;
  return {std::move(p)};
}

int run(const Flags& f) {
  const auto t0 = Clock::now();
  const std::vector<Heuristic> heuristics = heuristics_from(f.heuristics);
  const std::vector<BudgetSpec> budgets = parse_budget_list(f.budgets);
  RunOptions opts;
  opts.policy = policy_from_name(f.policy);
  opts.cost = cost_model_from_name(f.cost);
  opts.seed = f.seed;
  opts.sample = f.sample;
  opts.thrash_limit = f.thrash_limit;
  opts.segments = f.segments;
  opts.swap = f.swap;
  if (f.swap) opts.swap_cost_per_byte = swap_cost_per_byte(f.swap_bandwidth, opts.cost, "--cost");
  opts.swap_priced = f.swap_priced;
  opts.prototype = prototype_rules_from(f.prototype);
  opts.record_schedule = f.optimal;  // the heuristics' schedules start the MIP
  Reporter out(f);
  double parse_seconds = 0, replay_seconds = 0;
  std::size_t runs = 0;
  for (const std::string& input : f.inputs) {
    const auto tp = Clock::now();
    const std::vector<Program> programs = read_input(input);
    parse_seconds += since(tp);
    for (const Program& p : programs) {
      const auto tr = Clock::now();
      const Baseline base = baseline(p, opts);
      out.program(p, base);
      Sweep sweep;
      sweep.title = fmt::format("{} ({} cost, {})", stem_of(p.source), f.cost, f.policy);
      sweep.thrash_limit = f.thrash_limit > 0 ? f.thrash_limit : 3;
      for (Heuristic h : heuristics) sweep.heuristics.emplace_back(heuristic_name(h));
      if (f.lower_bound) sweep.heuristics.emplace_back("bound");
      const OpGraph graph = f.lower_bound ? build_op_graph(p, opts.cost) : OpGraph{};
      for (const BudgetSpec& b : budgets) {
        std::optional<double> best;
        std::vector<std::optional<double>> line;
        std::vector<std::pair<std::string, RunRow>> rows;  // each heuristic's seeds in turn
        for (Heuristic h : heuristics) {
          std::optional<double> sum = 0;  // the sweep's point: the mean, if every seed ran
          for (std::uint64_t s = 0; s < f.seeds; ++s) {
            RunOptions o = opts;
            o.heuristic = h;
            o.seed = f.seed + s;
            rows.emplace_back(std::string(heuristic_name(h)), run(p, base, o, b));
            ++runs;
            const auto& overhead = rows.back().second.overhead;
            sum = sum && overhead ? std::optional(*sum + *overhead) : std::nullopt;
          }
          line.push_back(sum ? std::optional(*sum / static_cast<double>(f.seeds)) : std::nullopt);
        }
        if (f.optimal && !rows.empty()) best = optimum(p, base, rows, f, opts.cost, out);
        if (f.lower_bound && !rows.empty())
          line.push_back(lower_bound_row(p, graph, base, rows.front().second, f, out));
        for (std::size_t i = 0; i < rows.size(); ++i) {
          const auto& [name, row] = rows[i];
          std::optional<double> vs;
          if (best && *best > 0 && row.result.status == ReplayStatus::Ok)
            vs = row.result.compute / *best;
          out.row(p, name, row, vs, f.seed + i % f.seeds);
        }
        for (std::size_t i = 0; f.seeds > 1 && i < rows.size(); i += f.seeds) {
          std::vector<RunRow> seeded;
          for (std::size_t s = 0; s < f.seeds; ++s) seeded.push_back(rows[i + s].second);
          out.summary(rows[i].first, seeded, best);
        }
        if (!rows.empty() && rows.front().second.budget_fraction) {
          sweep.fractions.push_back(*rows.front().second.budget_fraction);
          sweep.overhead.push_back(line);
        }
      }
      replay_seconds += since(tr);
      if (f.sweep) {
        const std::string base_name = f.out + "-" + stem_of(p.source);
        write_sweep_csv(sweep, base_name + ".csv");
        std::string why;
        if (plot_sweep(sweep, base_name + ".csv", base_name + ".png", &why))
          std::fprintf(stderr, "dtr_sim: wrote %s.csv and %s.png\n", base_name.c_str(),
                       base_name.c_str());
        else
          std::fprintf(stderr, "dtr_sim: wrote %s.csv; no plot: %s\n", base_name.c_str(),
                       why.c_str());
      }
    }
  }
  std::FILE* timing = f.json ? stderr : stdout;
  std::fprintf(timing, "\ndtr_sim: %zu runs in %.2f s (parsing %.2f s, replaying %.2f s)\n", runs,
               since(t0), parse_seconds, replay_seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Offline DTR simulator: replays traces and the DTR prototype's logs under any heuristic, "
      "policy "
      "and budget on the framework's own pool, without running kernels"};
  Flags f;
  app.add_option("inputs", f.inputs,
                 "traces (--trace), prototype logs, .zip archives of *.log files, or chain:N "
                 "(dtr_chain's program of N calls, 1 MiB tensors)")
      ->required();
  app.add_option("--heuristic", f.heuristics,
                 "one heuristic, several comma-separated, or 'all' "
                 "(dtr, dtr-eq, dtr-local, lru, largest, msps, estar, random)");
  app.add_option("--policy", f.policy, "deallocation policy: eager-evict, banish or ignore");
  app.add_option("--budget", f.budgets,
                 "budgets: bytes with units (300MiB), fractions of the unbudgeted peak "
                 "(0.4), 'none', a list 0.2,0.3,0.5 or a range 0.1:1.0:0.1");
  app.add_option("--thrash-limit", f.thrash_limit,
                 "stop a run whose compute exceeds this multiple of the "
                 "unbudgeted compute (0: never)")
      ->check(examples::non_negative_real());
  app.add_option("--seed", f.seed, "seed for candidate sampling and the random heuristic")
      ->check(
          examples::whole_in_range<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max()));
  app.add_option("--seeds", f.seeds,
                 "run each heuristic and budget with this many seeds, --seed on; the table shows "
                 "the means over the runs that ended ok and their overheads' min and max, the "
                 "JSON one row per run with its seed, a sweep the mean where every seed ran")
      ->check(examples::whole_in_range<std::uint64_t>(1, 1000));
  app.add_option("--sample", f.sample,
                 "candidates scored per eviction (0: the pool's default sampling)")
      ->check(examples::whole_in_range<std::size_t>(0, 1'000'000'000));
  app.add_option("--cost", f.cost, "cost model: time, flops, bytes or unit");
  app.add_flag("--segments", f.segments,
               "model a GPU's caching allocator (2 and 20 MiB segments split into blocks): the "
               "budget counts its fragmentation, reported as frag@peak (held minus resident when "
               "resident bytes peak)");
  auto* swap = app.add_flag("--swap", f.swap,
                            "before evicting, move values that cannot be recomputed (parameters, "
                            "inputs, values kept for their readers) out of the budget; each "
                            "copy adds its bytes over --swap-bandwidth to the compute (--cost "
                            "time only)");
  app.add_option("--swap-bandwidth", f.swap_bandwidth,
                 "GB/s of the link a swap crosses, each way (default 12: PCIe 3.0 x16)")
      ->check(examples::real_in_range(0, false, 1e6, "a positive number of GB/s up to 1e6"))
      ->needs(swap);
  app.add_flag("--swap-priced", f.swap_priced,
               "weigh each swap against the eviction candidates, scored by the heuristic at the "
               "cost of its two copies, instead of swapping first")
      ->needs(swap);
  app.add_option("--prototype", f.prototype,
                 "the DTR prototype simulator's rules: all, none (default), all-but:RULE, or a "
                 "list of exact-sizes, full-scan, compute-clock, keep-stamp, single-victim, "
                 "keep-released, stamp-first")
      ->capture_default_str();
  app.add_flag("--json", f.json, "one JSON object per run per line instead of a table");
  app.add_flag("--sweep", f.sweep,
               "budgets 0.1..1.0 for every heuristic (unless given), written as a CSV and a "
               "PNG plot per program");
  app.add_option("--out", f.out, "file-name prefix of --sweep output");
  app.add_flag("--optimal", f.optimal,
               "also solve the optimum (MIP, small programs) and Chen's sqrt(n) schedule");
  app.add_flag("--lower-bound", f.lower_bound,
               "also bound every schedule's recomputation from below (a covering LP, any size)");
  app.add_option("--time-limit", f.time_limit,
                 "seconds the MIP or the lower bound's LP may take per budget")
      ->check(examples::real_in_range(0, false, 1e7, "a positive number of seconds up to 1e7"));
  CLI11_PARSE(app, argc, argv);
  if (f.sweep && app.count("--heuristic") == 0) f.heuristics = "all";
  try {
    return run(f);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "dtr_sim: out of memory\n");
    return 1;
  } catch (const std::exception& e) {  // remat::Error, and whatever a library below throws
    std::fprintf(stderr, "dtr_sim: %s\n", e.what());
    return 1;
  }
}
