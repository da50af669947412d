// What a memory budget costs: one training step of an MLP and of a small CNN, timed without a
// budget and then under budgets of 1.0 ... 0.2 of the unbudgeted peak and at the smallest
// feasible one (bisected), with DTR's evictions, rematerializations and overheads per step.
// Usage: budget_sweep --model all --steps 5 --threads 1
#include <fmt/format.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "bench/constant_batch.h"
#include "examples/common/flag_checks.h"
#include "models/resnet.h"
#include "nn/nn.h"
#include "remat.h"

using namespace remat;

namespace {

constexpr double kMiB = 1048576.0;

// A model, its optimizer and one fixed random batch; step() is one training step.
struct Workload {
  std::string name;
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<nn::SGD> optimizer;
  Tensor inputs, targets;
  bool keep_graph = false;

  void step() {
    Tensor loss = cross_entropy(model->forward(inputs), targets);
    optimizer->zero_grad();
    backward(loss);
    (void)loss.item<float>();
    // While the graph lives, records of this step still read the parameters, so their in-place
    // update must keep the old values (copy-on-write): drop it first unless asked not to.
    if (!keep_graph) loss = Tensor();
    optimizer->step();
    Pool::of(Device::cpu()).end_step();  // dtr-next learns each step's calls from the last
  }
};

using bench::constant_copy;

// An MLP of `depth` hidden layers; `batch` rows of `in` features.
Workload make_mlp(std::string name, std::int64_t in, std::int64_t width, int depth,
                  std::int64_t batch) {
  Workload w;
  w.name = std::move(name);
  auto net = std::make_shared<nn::Sequential>();
  std::int64_t features = in;
  for (int l = 0; l < depth; ++l) {
    net->push_back(std::make_shared<nn::Linear>(features, width));
    net->push_back(std::make_shared<nn::ReLU>());
    features = width;
  }
  net->push_back(std::make_shared<nn::Linear>(features, 10));
  w.model = net;
  w.optimizer =
      std::make_unique<nn::SGD>(w.model->parameters(), nn::SGDOptions{.lr = 0.01, .momentum = 0.9});
  w.inputs = constant_copy(randn({batch, in}, {.seed = 11}));
  w.targets = constant_copy(randint(0, 10, {batch}, {.seed = 12}));
  return w;
}

// Wide and shallow at a small batch: parameters, gradients and momentum are 0.7 of the peak and
// never evictable, so budgets below about 0.8 are infeasible.
Workload make_wide_mlp() {
  return make_mlp("mlp", 784, 1024, 3, 512);
}
// Deep and narrow at a large batch: activations dominate, as in most training runs.
Workload make_deep_mlp() {
  return make_mlp("deep-mlp", 128, 128, 32, 8192);
}

Workload make_cnn() {
  Workload w;
  w.name = "resnet20";
  w.model = models::resnet("resnet20", {.in_channels = 3, .num_classes = 10});
  w.optimizer =
      std::make_unique<nn::SGD>(w.model->parameters(), nn::SGDOptions{.lr = 0.01, .momentum = 0.9});
  w.inputs = constant_copy(randn({64, 3, 32, 32}, {.seed = 21}));
  w.targets = constant_copy(randint(0, 10, {64}, {.seed = 22}));
  return w;
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The figures of one budget: medians of step time, per-step means of the DTR counters.
struct Row {
  std::string label;               // "none", "none-end", "0.50", "min"
  std::optional<double> fraction;  // empty: unbudgeted
  std::optional<std::size_t> budget;
  bool feasible = true;
  std::string error, error_op;
  std::vector<double> samples;  // ms of each timed step
  double ms = 0;
  double evictions = 0, remats = 0, recompute_ms = 0, overhead_ms = 0, overhead_share = 0;
  double swaps = 0, swap_mib = 0, swap_ms = 0;  // per step: copies to or from host (--swap)
  double page_faults = 0;    // minor faults per step: fresh pages after the pool returned memory
  std::size_t peak = 0;      // over the timed steps and the one before them
  std::size_t peak_all = 0;  // over the warm-up steps too
};

class Sweep {
 public:
  Sweep(std::function<Workload()> make, int warmup, int steps, std::vector<double> fractions,
        bool search_min)
      : make_(std::move(make)),
        w_(make_()),
        warmup_(warmup),
        steps_(steps),
        fractions_(std::move(fractions)),
        search_min_(search_min) {}

  // The unbudgeted rows (at the start and at the end, to show drift), each listed budget, and
  // the smallest feasible fraction.  Slowdowns are against the median of all unbudgeted steps.
  std::vector<Row> run() {
    std::vector<Row> rows;
    rows.push_back(measure("none", std::nullopt, warmup_, steps_));
    peak_ = rows.back().peak;
    double lo = 0, hi = 1;  // largest infeasible, smallest feasible fraction seen
    for (double f : fractions_) {
      rows.push_back(measure(fmt::format("{:.2f}", f), f, 0, steps_));
      if (rows.back().feasible)
        hi = std::min(hi, f);
      else
        lo = std::max(lo, f);
    }
    if (!search_min_) return finish(rows);
    if (lo >= hi) lo = 0;  // not monotone: search below the smallest feasible fraction
    // Bisect to 0.02 with short probes (a step to settle, one to check), then time the result.
    while (hi - lo > 0.02) {
      const double mid = 0.5 * (lo + hi);
      (measure("probe", mid, 0, 1).feasible ? hi : lo) = mid;
    }
    Row min_row = measure("min", hi, 0, steps_);
    // Near the edge feasibility can depend on measured kernel times (the cost model): step up.
    for (int i = 0; i < 5 && !min_row.feasible && hi < 1; ++i) {
      hi = std::min(1.0, hi + 0.01);
      min_row = measure("min", hi, 0, steps_);
    }
    min_fraction_ = hi, max_infeasible_ = lo;
    rows.push_back(min_row);
    return finish(rows);
  }

  std::vector<Row> finish(std::vector<Row>& rows) {
    rows.push_back(measure("none-end", std::nullopt, 0, steps_));
    std::vector<double> base;
    for (const Row& r : rows)
      if (!r.fraction) base.insert(base.end(), r.samples.begin(), r.samples.end());
    base_ms_ = median(base);
    return rows;
  }

  void print_table(const std::vector<Row>& rows) const {
    std::printf(
        "\n%s: unbudgeted peak %.2f MiB (timed steps, after warm-up), %.1f ms/step (median of %zu "
        "unbudgeted steps); %d timed steps per "
        "row; minimum feasible fraction %.4f (infeasible at %.4f)\n",
        w_.name.c_str(), peak_ / kMiB, base_ms_, 2 * static_cast<std::size_t>(steps_), steps_,
        min_fraction_, max_infeasible_);
    std::printf(
        "per step: medians of ms; means of evictions, rematerializations, recompute ms, "
        "search + bookkeeping (ovhd) ms and minor page faults; peak over the timed steps and the "
        "one before; est = 1 + (recompute + ovhd) / unbudgeted ms\n");
    std::printf("%-8s %9s %9s %8s %8s %9s %9s %10s %10s %7s %9s %6s %8s\n", "budget", "MiB",
                "ms/step", "slowdown", "est", "evict/st", "remat/st", "recomp ms", "ovhd ms",
                "ovhd %", "peak MiB", "within", "faults");
    bool swapped = false;
    for (const Row& r : rows) swapped = swapped || r.swaps > 0;
    if (swapped) std::printf("copies to and from host memory per step (--swap): count, MiB, ms\n");
    for (const Row& r : rows) {
      const std::string name = r.label == "min" ? fmt::format("min {:.3f}", *r.fraction) : r.label;
      const double mib = (r.budget ? *r.budget : peak_) / kMiB;
      if (!r.feasible) {
        std::printf("%-8s %9.2f infeasible (OutOfBudget in %s)\n", name.c_str(), mib,
                    r.error_op.c_str());
        continue;
      }
      std::printf("%-8s %9.2f %9.1f %8.2f %8.2f %9.1f %9.1f %10.2f %10.2f %7.2f %9.2f %6s %8.0f\n",
                  name.c_str(), mib, r.ms, r.ms / base_ms_, estimated_slowdown(r), r.evictions,
                  r.remats, r.recompute_ms, r.overhead_ms, 100 * r.overhead_share, r.peak / kMiB,
                  within(r) ? "yes" : "NO", r.page_faults);
      if (swapped)
        std::printf("%-8s swaps %.1f, %.2f MiB, %.2f ms\n", "", r.swaps, r.swap_mib, r.swap_ms);
    }
  }

  nlohmann::json json(const Row& r) const {
    nlohmann::json j = {
        {"model", w_.name},
        {"row", r.label},
        {"fraction", r.fraction ? nlohmann::json(*r.fraction) : nlohmann::json(nullptr)},
        {"budget_bytes", r.budget ? nlohmann::json(*r.budget) : nlohmann::json(nullptr)},
        {"unbudgeted_peak_bytes", peak_},
        {"unbudgeted_ms_per_step", base_ms_},
        {"feasible", r.feasible}};
    if (!r.feasible) {
      j["error"] = r.error;
      return j;
    }
    j.update({{"ms_per_step", r.ms},
              {"slowdown", r.ms / base_ms_},
              {"estimated_slowdown", estimated_slowdown(r)},
              {"evictions_per_step", r.evictions},
              {"rematerializations_per_step", r.remats},
              {"recompute_ms_per_step", r.recompute_ms},
              {"overhead_ms_per_step", r.overhead_ms},
              {"overhead_share", r.overhead_share},
              {"minor_page_faults_per_step", r.page_faults},
              {"peak_resident_bytes", r.peak},
              {"peak_resident_bytes_with_warmup", r.peak_all},
              {"within_budget", within(r)},
              {"swaps_per_step", r.swaps},
              {"swap_mib_per_step", r.swap_mib},
              {"swap_ms_per_step", r.swap_ms},
              {"steps", steps_}});
    return j;
  }

 private:
  // The slowdown the cache's own counters account for: the unbudgeted step plus recompute,
  // search, bookkeeping and copies to host memory.  Less noisy than `slowdown` on a loaded machine.
  double estimated_slowdown(const Row& r) const {
    return 1 + (r.recompute_ms + r.overhead_ms + r.swap_ms) / base_ms_;
  }
  static bool within(const Row& r) { return !r.budget || r.peak_all <= *r.budget; }

  // Sets the budget, runs `warmup` steps, resets the stats, runs one more step to settle (under
  // dtr-next, until each of its scores had a trial step) and times `steps` steps.  OutOfBudget:
  // infeasible.  The stats are reset once, not per step: reset_stats() also resets the peak, which
  // caps the allocator's cache when unbudgeted, so the step after a reset returns memory to the
  // kernel and page-faults it back.
  Row measure(std::string label, std::optional<double> fraction, int warmup, int steps) {
    Row row;
    row.label = std::move(label);
    row.fraction = fraction;
    if (fraction) row.budget = static_cast<std::size_t>(*fraction * static_cast<double>(peak_));
    std::fprintf(stderr, "%s: %s %s\n", w_.name.c_str(), row.label.c_str(),
                 fraction ? fmt::format("{:.4f}", *fraction).c_str() : "");
    Pool& pool = Pool::of(Device::cpu());
    DtrStats sum;
    std::uint64_t swaps = 0;  // either way
    try {
      pool.set_budget(row.budget);
      pool.reset_stats();
      for (int i = 0; i < warmup; ++i) w_.step();
      const std::size_t warmup_peak = pool.stats().peak_resident_bytes;
      pool.reset_stats();
      w_.step();
      // Under a new budget dtr-next gives each of its scores (and sample sizes) a trial step
      // (dtr/score_choice.h); the timed steps are the ones after.
      for (std::size_t i = 0; i < ScoreChoice::kOptions && !pool.score_choice().settled() &&
                              pool.config().heuristic == Heuristic::DtrNext;
           ++i)
        w_.step();
      DtrStats before = pool.stats();
      for (int i = 0; i < steps; ++i) {
        const long faults0 = minor_faults();
        const auto t0 = std::chrono::steady_clock::now();
        w_.step();
        row.samples.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
        row.page_faults += static_cast<double>(minor_faults() - faults0);
        const DtrStats after = pool.stats(), s = after.since(before);
        before = after;
        sum.evictions += s.evictions;
        sum.rematerializations += s.rematerializations;
        sum.recompute_seconds += s.recompute_seconds;
        sum.search_seconds += s.search_seconds + s.bookkeeping_seconds;
        swaps += s.swap_outs + s.swap_ins;
        sum.swap_bytes += s.swap_bytes;
        sum.swap_seconds += s.swap_seconds;
      }
      row.peak = pool.stats().peak_resident_bytes;  // the settling step and the timed ones
      row.peak_all = std::max(warmup_peak, row.peak);
    } catch (const OutOfBudget& e) {
      row.feasible = false;
      row.error = e.what();
      row.error_op = e.op();
      // An OutOfBudget inside an optimizer's in-place update can leave a parameter without its
      // bytes (the pool does not roll back begin_write): continue on a fresh, warmed-up copy.
      pool.set_budget(std::nullopt);
      w_ = make_();
      for (int i = 0; i < warmup_; ++i) w_.step();
      return row;
    }
    const double n = steps, total_ms = std::accumulate(row.samples.begin(), row.samples.end(), 0.0);
    row.ms = median(row.samples);
    row.evictions = static_cast<double>(sum.evictions) / n;
    row.page_faults /= n;
    row.remats = static_cast<double>(sum.rematerializations) / n;
    row.recompute_ms = sum.recompute_seconds * 1e3 / n;
    row.overhead_ms = sum.search_seconds * 1e3 / n;
    row.overhead_share = total_ms > 0 ? sum.search_seconds * 1e3 / total_ms : 0;
    row.swaps = static_cast<double>(swaps) / n;
    row.swap_mib = static_cast<double>(sum.swap_bytes) / kMiB / n;
    row.swap_ms = sum.swap_seconds * 1e3 / n;
    return row;
  }

  std::function<Workload()> make_;
  Workload w_;
  int warmup_, steps_;
  std::vector<double> fractions_;
  bool search_min_;
  double base_ms_ = 0, min_fraction_ = 1, max_infeasible_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  ensure_thread_policy(argc, argv);
  CLI::App app{"Step time and DTR counters of an MLP and a ResNet-20 across memory budgets"};
  std::string model = "all";
  int steps = 5, warmup = 2, threads = 1;
  bool keep_graph = false, no_min = false, swap = false;
  std::vector<double> fractions{1.0, 0.8, 0.6, 0.5, 0.4, 0.3, 0.25, 0.2};
  std::string heuristic = "dtr-eq", cost = "time";
  app.add_option("--model", model, "mlp (wide), deep-mlp, cnn or all")
      ->check(CLI::IsMember({"mlp", "deep-mlp", "cnn", "all"}));
  app.add_option("--steps", steps, "timed steps per budget")
      ->check(examples::whole_in_range(1, 1'000'000));
  app.add_option("--warmup", warmup, "unbudgeted warm-up steps")
      ->check(examples::whole_in_range(0, 1'000'000));
  app.add_option("--threads", threads, "CPU threads")
      ->check(examples::whole_in_range(1, max_threads()));
  app.add_flag("--keep-graph", keep_graph,
               "keep the step's graph alive through optimizer.step(), as the examples do");
  app.add_option("--fractions", fractions, "budgets as fractions of the unbudgeted peak")
      ->delimiter(',')
      ->check(examples::real_in_range(0, false, 1, "a fraction in (0, 1]"));
  app.add_flag("--no-min", no_min, "skip the search for the smallest feasible budget");
  app.add_option("--heuristic", heuristic, "eviction heuristic");
  app.add_option("--dtr-cost", cost, "cost model: time, flops, bytes or unit");
  auto* swap_flag = app.add_flag("--swap", swap,
                                 "before evicting, move values that cannot be recomputed to host "
                                 "memory (DtrConfig::swap)");
  std::optional<double> swap_bandwidth;
  app.add_option("--swap-bandwidth", swap_bandwidth,
                 "GB/s of a copy: swapping then competes with eviction instead of coming first "
                 "(DtrConfig::swap_cost_per_byte; needs --swap and --dtr-cost time)")
      ->check(examples::real_in_range(0, false, 1e6, "a positive number of GB/s up to 1e6"))
      ->needs(swap_flag);
  CLI11_PARSE(app, argc, argv);

  try {
    set_num_threads(threads);
    Pool::of(Device::cpu()).set_heuristic(heuristic_from_name(heuristic));
    Pool::of(Device::cpu()).set_cost_model(cost_model_from_name(cost));
    Pool::of(Device::cpu())
        .set_swap(swap, swap_bandwidth
                            ? swap_cost_per_byte(*swap_bandwidth, cost_model_from_name(cost),
                                                 "--dtr-cost")
                            : 0);
    std::printf(
        "budget sweep: %d thread(s), heuristic %s%s, cost model %s, graph %s before "
        "optimizer.step(); "
        "budgets are fractions of the unbudgeted peak (parameters, gradients and optimizer state "
        "included)\n",
        threads, heuristic.c_str(), swap ? " with swapping" : "", cost.c_str(),
        keep_graph ? "kept" : "dropped");
    std::vector<nlohmann::json> lines;
    std::vector<std::function<Workload()>> makers;
    auto with_graph = [keep_graph](Workload (*make)()) {
      return [make, keep_graph] {
        Workload w = make();
        w.keep_graph = keep_graph;
        return w;
      };
    };
    if (model == "mlp" || model == "all") makers.push_back(with_graph(make_wide_mlp));
    if (model == "deep-mlp" || model == "all") makers.push_back(with_graph(make_deep_mlp));
    if (model == "cnn" || model == "all") makers.push_back(with_graph(make_cnn));
    for (auto& make : makers) {
      Sweep sweep(make, warmup, steps, fractions, !no_min);
      const std::vector<Row> rows = sweep.run();
      sweep.print_table(rows);
      for (const Row& r : rows) lines.push_back(sweep.json(r));
    }
    std::printf("\n");
    for (const auto& j : lines) std::printf("%s\n", j.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "budget_sweep: %s\n", e.what());
    return 1;
  }
  return 0;
}
