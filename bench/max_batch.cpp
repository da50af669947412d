// The DTR paper's Table 1 question: at a fixed memory, how much larger an input trains with DTR
// than without it.  For each model, the largest input (ResNet: batch; TreeLSTM: nodes per tree;
// Unrolled GAN: unrolled steps) whose unbudgeted training peak fits in --memory bytes, and the
// largest that trains under a DTR budget of --memory bytes, each found by growing the input and
// then bisecting, a few steps per trial.  One JSON line per model.
// Usage: max_batch --model all [--memory BYTES] [--steps 2] [--max-slowdown 20]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/constant_batch.h"
#include "dtr/config.h"
#include "dtr/errors.h"
#include "examples/common/flag_checks.h"
#include "models/gan.h"
#include "models/resnet.h"
#include "models/treelstm.h"
#include "nn/nn.h"
#include "remat.h"

using namespace remat;

namespace {

// A training step at input size n, built fresh for each trial: step() runs one step.
struct Workload {
  std::function<void()> step;
};
using Factory = std::function<Workload(std::int64_t n)>;

struct ModelSpec {
  std::string name;
  std::string input;  // what n counts
  std::int64_t default_input;
  Factory make;
};

using bench::constant_copy;

ModelSpec resnet_spec(int depth, std::int64_t batch) {
  return {fmt::format("resnet{}", depth), "batch", batch, [depth](std::int64_t n) {
            auto net = models::cifar_resnet(depth, {.in_channels = 3, .num_classes = 10});
            auto opt = std::make_shared<nn::SGD>(net->parameters(),
                                                 nn::SGDOptions{.lr = 0.01, .momentum = 0.9});
            const Tensor x = constant_copy(randn({n, 3, 32, 32}, {.seed = 21}));
            const Tensor y = constant_copy(randint(0, 10, {n}, {.seed = 22}));
            return Workload{[net, opt, x, y] {
              Tensor loss = cross_entropy(net->forward(x), y);
              opt->zero_grad();
              backward(loss);
              (void)loss.item<float>();
              loss = Tensor();
              opt->step();
            }};
          }};
}

// Appends a random ListOps subtree of exactly `nodes` nodes (1, or 3 and more: a list is an
// operator and at least two arguments) to `t` in post-order.
void grow(int nodes, listops::Rng& rng, listops::Tree& t) {
  if (nodes == 1) {
    t.token.push_back(rng.below(10));
    t.children.emplace_back();
    return;
  }
  const int below = nodes - 1;
  // Arguments are 1 node or at least 3, so `below` nodes split into k of them unless below is
  // k + 1: then one argument fewer (or more).
  int k = std::min({below, 5, 2 + rng.below(4)});
  if (below == k + 1) k = k > 2 ? k - 1 : k + 1;
  std::vector<int> sizes(static_cast<std::size_t>(k), 1);
  for (int extra = below - k; extra > 0;) {
    int& s = sizes[static_cast<std::size_t>(rng.below(k))];
    if (s > 1) {
      ++s, --extra;
    } else if (extra >= 2) {
      s = 3, extra -= 2;
    }  // else draw again: some argument has 3 or more nodes
  }
  std::vector<int> kids;
  for (int size : sizes) {
    grow(size, rng, t);
    kids.push_back(t.size() - 1);
  }
  t.token.push_back(listops::kMax + rng.below(4));
  t.children.push_back(kids);
}

listops::Tree random_tree(int nodes, std::uint64_t seed) {
  REMAT_CHECK(nodes == 1 || nodes >= 3, "max_batch: no ListOps tree has {} nodes", nodes);
  listops::Rng rng(seed);
  listops::Tree t;
  grow(nodes, rng, t);
  return t;
}

// `trees_per_step` random trees of n nodes, one level-batched forward per tree (the example's
// --group 1), the losses summed: each op is one tree's level, so a budget can hold a few levels
// of one tree while the whole batch's states are evicted and recomputed.
ModelSpec treelstm_spec(std::int64_t trees_per_step, std::int64_t nodes) {
  return {
      "treelstm", "nodes per tree", nodes, [trees_per_step](std::int64_t n) {
        auto net = std::make_shared<models::TreeLSTM>(models::TreeLSTMOptions{});
        auto opt = std::make_shared<nn::Adam>(net->parameters(), nn::AdamOptions{.lr = 1e-3});
        std::vector<listops::Tree> trees;
        std::vector<Tensor> labels;
        for (std::int64_t i = 0; i < trees_per_step; ++i) {
          trees.push_back(random_tree(static_cast<int>(n), 1000 + static_cast<std::uint64_t>(i)));
          labels.push_back(tensor(std::vector<std::int64_t>{listops::evaluate(trees.back())}));
        }
        return Workload{[net, opt, trees, labels] {
          Tensor loss;
          for (std::size_t i = 0; i < trees.size(); ++i) {
            const Tensor part = cross_entropy(net->logits({&trees[i], 1}), labels[i]);
            loss = loss.defined() ? add(loss, part) : part;
          }
          opt->zero_grad();
          backward(loss);
          (void)loss.item<float>();
          loss = Tensor();
          opt->step();
        }};
      }};
}

ModelSpec gan_spec(std::int64_t batch, std::int64_t unroll) {
  return {"gan", "unrolled steps", unroll, [batch](std::int64_t n) {
            auto gan = std::make_shared<models::UnrolledGan>(
                models::GanOptions{}, models::UnrolledGanOptions{.unroll = static_cast<int>(n)});
            const Tensor real = models::sample_ring(batch, 31);
            const Tensor noise = constant_copy(randn({batch, 256}, {.seed = 32}));
            return Workload{[gan, real, noise] { gan->step(real, noise); }};
          }};
}

struct Trial {
  bool fits = false;
  std::string error;
  double ms_per_step = 0;  // the last step's
  std::size_t peak = 0;
};

// `steps` steps of a fresh workload at input n, unbudgeted or under `budget` bytes.
Trial run_trial(const ModelSpec& spec, std::int64_t n, std::optional<std::size_t> budget, int steps,
                Heuristic heuristic) {
  Pool& pool = Pool::of(Device::cpu());
  DtrConfig cfg;
  cfg.heuristic = heuristic;
  pool.configure(cfg);
  manual_seed(0);
  Trial t;
  try {
    pool.reset_stats();
    Workload w = spec.make(n);
    pool.set_budget(budget);
    for (int s = 0; s < steps; ++s) {
      const auto t0 = std::chrono::steady_clock::now();
      w.step();
      pool.end_step();
      t.ms_per_step =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    t.fits = true;
  } catch (const OutOfBudget& e) {
    t.error = e.what();
  }
  t.peak = pool.stats().peak_resident_bytes;
  pool.configure(DtrConfig{});
  return t;
}

// The largest n >= lo (which must fit) for which fits(n) holds, assuming it is monotone: grow by
// half until a failure, then bisect.  `best` gets the trial of the answer.
std::int64_t largest(std::int64_t lo, const std::function<Trial(std::int64_t)>& trial,
                     const std::function<bool(std::int64_t, const Trial&)>& fits, Trial& best,
                     std::int64_t limit) {
  std::int64_t hi = 0;  // the smallest failing size found, 0 while none
  auto attempt = [&](std::int64_t n) {
    const Trial t = trial(n);
    const bool ok = fits(n, t);
    std::fprintf(stderr, "  %lld: %s (%.0f ms/step, peak %.1f MiB)\n", static_cast<long long>(n),
                 ok ? "fits" : "does not fit", t.ms_per_step, t.peak / 1048576.0);
    if (ok)
      lo = n, best = t;
    else
      hi = n;
  };
  while (hi == 0) {
    const std::int64_t next = std::min(limit, std::max(lo + 1, lo + lo / 2));
    if (next == lo) return lo;  // at the limit
    attempt(next);
  }
  while (hi - lo > std::max<std::int64_t>(1, lo / 50)) attempt(lo + (hi - lo) / 2);  // within 2%
  return lo;
}

}  // namespace

int main(int argc, char** argv) {
  ensure_thread_policy(argc, argv);
  CLI::App app{"The largest input that trains in a given memory, without and with DTR"};
  std::string model = "all";
  std::string memory_text;
  int steps = 2;
  int threads = 1;
  double max_slowdown = 20;
  std::int64_t limit = 1 << 20;
  std::string heuristic_name = "dtr-eq";
  app.add_option("--model", model, "resnet, treelstm, gan or all")
      ->check(CLI::IsMember({"resnet", "treelstm", "gan", "all"}));
  app.add_option("--memory", memory_text,
                 "bytes (or 300MiB, 1.5GB); default: each model's unbudgeted peak at its default "
                 "input (ResNet-32 batch 32, TreeLSTM 8 trees of 201 nodes, GAN 5 unrolled steps)");
  app.add_option("--steps", steps, "training steps per trial (the last one is timed)")
      ->check(examples::whole_in_range(1, 100));
  app.add_option("--max-slowdown", max_slowdown,
                 "a DTR trial fits only if its step takes at most this many times the unbudgeted "
                 "step per unit of input at the unbudgeted maximum")
      ->check(examples::positive_real());
  app.add_option("--limit", limit, "the largest input tried")
      ->check(examples::whole_in_range<std::int64_t>(2, std::int64_t{1} << 40));
  app.add_option("--threads", threads, "CPU threads")
      ->check(examples::whole_in_range(1, max_threads()));
  app.add_option("--heuristic", heuristic_name, "eviction heuristic of the DTR trials");
  CLI11_PARSE(app, argc, argv);
  try {
    const Heuristic heuristic = heuristic_from_name(heuristic_name);
    set_num_threads(threads);
    std::optional<std::size_t> memory;
    if (!memory_text.empty()) {
      const BudgetSpec spec = parse_budget(memory_text);
      REMAT_CHECK(spec.bytes.has_value(), "--memory must be a number of bytes, got '{}'",
                  memory_text);
      memory = spec.bytes;
    }
    std::vector<ModelSpec> specs;
    if (model == "resnet" || model == "all") specs.push_back(resnet_spec(32, 32));
    if (model == "treelstm" || model == "all") specs.push_back(treelstm_spec(8, 201));
    if (model == "gan" || model == "all") specs.push_back(gan_spec(512, 5));
    for (const ModelSpec& spec : specs) {
      std::fprintf(stderr, "%s (input: %s)\n", spec.name.c_str(), spec.input.c_str());
      const Trial at_default = run_trial(spec, spec.default_input, std::nullopt, steps, heuristic);
      const std::size_t bytes = memory.value_or(at_default.peak);
      auto unbudgeted = [&](std::int64_t n) {
        return run_trial(spec, n, std::nullopt, steps, heuristic);
      };
      auto fits_unbudgeted = [&](std::int64_t, const Trial& t) {
        return t.fits && t.peak <= bytes;
      };
      REMAT_CHECK(fits_unbudgeted(spec.default_input, at_default),
                  "{}: its default input ({} {}) needs {} bytes unbudgeted, more than --memory {}",
                  spec.name, spec.default_input, spec.input, at_default.peak, bytes);
      Trial base = at_default;
      const std::int64_t unbudgeted_max =
          largest(spec.default_input, unbudgeted, fits_unbudgeted, base, limit);
      const double ms_per_unit = base.ms_per_step / static_cast<double>(unbudgeted_max);
      auto with_dtr = [&](std::int64_t n) { return run_trial(spec, n, bytes, steps, heuristic); };
      auto fits_dtr = [&](std::int64_t n, const Trial& t) {
        return t.fits && t.ms_per_step <= max_slowdown * ms_per_unit * static_cast<double>(n);
      };
      Trial dtr_best = with_dtr(unbudgeted_max);
      REMAT_CHECK(fits_dtr(unbudgeted_max, dtr_best),
                  "{}: under a budget of {} bytes the unbudgeted maximum ({}) does not train: {}",
                  spec.name, bytes, unbudgeted_max, dtr_best.error);
      const std::int64_t dtr_max = largest(unbudgeted_max, with_dtr, fits_dtr, dtr_best, limit);
      nlohmann::json line = {
          {"model", spec.name},
          {"input", spec.input},
          {"memory_bytes", bytes},
          {"unbudgeted_max", unbudgeted_max},
          {"dtr_max", dtr_max},
          {"ratio", static_cast<double>(dtr_max) / static_cast<double>(unbudgeted_max)},
          {"unbudgeted_ms_per_step", base.ms_per_step},
          {"dtr_ms_per_step", dtr_best.ms_per_step},
          {"unbudgeted_peak_bytes", base.peak},
          {"dtr_peak_bytes", dtr_best.peak},
          {"heuristic", heuristic_name},
          {"steps_per_trial", steps}};
      std::printf("%s\n", line.dump().c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "max_batch: %s\n", e.what());
    return 1;
  }
  return 0;
}
