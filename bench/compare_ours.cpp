// Our half of bench/compare_torch.sh: times training steps of the CIFAR ResNet-32 (batch 32,
// 3x32x32) and of a 784-1024-1024-10 MLP (batch 128), both SGD with momentum 0.9 and cross
// entropy, of the small-op models of bench/small_op_models.h (lstm_cell, treelstm) and of the
// language models of bench/lm_workloads.h (lstm_lm, transformer_lm), on demand,
// so the script can alternate us and PyTorch in rounds.  bench/compare_torch.py is the same
// program written with PyTorch; keep the two in step.
// Protocol: prints "ready" after warm-up; then each stdin line "<model> <steps>" runs that many
// steps and prints "<model> <ms> <ms> ..."; "budget <model> <steps> <fraction>" runs them
// unbudgeted and then under fraction x the unbudgeted step's peak and prints
// "budget <model> <fraction> <median ms unbudgeted> <median ms budgeted> <search s> <steps>
// <evictions> <recomputed ops> <budget bytes>" (or "budget <model> <fraction> infeasible
// <message>" when a step runs out of budget); "quit" or end of input stops.
// Usage: echo "mlp 5" | compare_ours --threads 1 [--profile: kernel time per op on stderr]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/lm_workloads.h"
#include "bench/small_op_models.h"
#include "examples/common/flag_checks.h"
#include "models/resnet.h"
#include "nn/nn.h"
#include "remat.h"

using namespace remat;

namespace {

struct Workload {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<nn::SGD> optimizer;
  Tensor inputs, targets;

  // One step as PyTorch runs it: backward frees the graph before the optimizer updates the
  // parameters, so the in-place updates need no copy-on-write.
  double step() {
    const auto t0 = std::chrono::steady_clock::now();
    {
      Tensor loss = cross_entropy(model->forward(inputs), targets);
      optimizer->zero_grad();
      backward(loss);
      (void)loss.item<float>();
    }
    optimizer->step();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
};

Workload make(std::shared_ptr<nn::Module> model, Tensor inputs, std::int64_t batch) {
  Workload w;
  w.model = std::move(model);
  w.optimizer =
      std::make_unique<nn::SGD>(w.model->parameters(), nn::SGDOptions{.lr = 0.01, .momentum = 0.9});
  w.inputs = std::move(inputs);
  w.targets = randint(0, 10, {batch}, {.seed = 2});
  return w;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Steps of `step` unbudgeted, then under fraction x the peak of an unbudgeted step.
std::string budgeted_run(const std::string& name, const std::function<double()>& step, int steps,
                         double fraction) {
  Pool& pool = Pool::of(Device::cpu());
  std::vector<double> free_ms, tight_ms;
  for (int i = 0; i < steps; ++i) free_ms.push_back(step());
  pool.reset_peak();
  step();
  const auto budget =
      static_cast<std::size_t>(fraction * static_cast<double>(pool.peak_resident_bytes()));
  try {
    pool.set_budget(budget);  // throws when the constants alone exceed it
    step();                   // settles the cache under the budget
    pool.reset_stats();
    for (int i = 0; i < steps; ++i) tight_ms.push_back(step());
  } catch (const OutOfBudget& e) {
    // The worker's graph may be left half built: the script starts a fresh one per budget.
    return fmt::format("budget {} {} infeasible {}", name, fraction, e.what());
  }
  const DtrStats s = pool.stats();
  pool.set_budget(std::nullopt);
  return fmt::format("budget {} {} {:.3f} {:.3f} {:.4f} {} {} {} {}", name, fraction,
                     median(free_ms), median(tight_ms), s.search_seconds, steps, s.evictions,
                     s.rematerializations, budget);
}

}  // namespace

int main(int argc, char** argv) {
  ensure_thread_policy(argc, argv);
  CLI::App app{
      "Timed training steps of ResNet-32 and an MLP, served on stdin for compare_torch.sh"};
  int threads = 1, warmup = 3;
  std::string only = "resnet32,mlp,lstm_cell,treelstm,lstm_lm,transformer_lm";
  app.add_option("--threads", threads, "CPU threads")
      ->check(examples::whole_in_range(1, max_threads()));
  app.add_option("--warmup", warmup, "untimed steps of each model before \"ready\"")
      ->check(examples::whole_in_range(0, 1'000'000));
  app.add_option("--models", only,
                 "comma-separated models to build (a budget is a fraction of the peak of all "
                 "of them together: run one model per worker for budgeted runs)");
  bool profile = false;
  app.add_flag("--profile", profile,
               "after each timed run, print the kernel time per op (OpProfiler) to stderr");
  CLI11_PARSE(app, argc, argv);
  auto wanted = [&](const std::string& name) {
    return ("," + only + ",").find("," + name + ",") != std::string::npos;
  };

  try {
    set_num_threads(threads);
    manual_seed(0);
    std::map<std::string, Workload> workloads;
    if (wanted("resnet32"))
      workloads.emplace("resnet32",
                        make(models::resnet("resnet32", {.in_channels = 3, .num_classes = 10}),
                             randn({32, 3, 32, 32}, {.seed = 1}), 32));
    if (wanted("mlp")) {
      auto mlp = std::make_shared<nn::Sequential>(
          std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(1024, 1024), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(1024, 10));
      workloads.emplace("mlp", make(mlp, randn({128, 784}, {.seed = 1}), 128));
    }
    std::map<std::string, bench::SmallOpModel> small;
    if (wanted("lstm_cell")) small.emplace("lstm_cell", bench::lstm_cell_model());
    if (wanted("treelstm")) small.emplace("treelstm", bench::treelstm_model());
    if (wanted("lstm_lm")) small.emplace("lstm_lm", bench::lstm_lm_workload());
    if (wanted("transformer_lm")) small.emplace("transformer_lm", bench::transformer_lm_workload());
    std::map<std::string, std::function<double()>> steppers;
    for (auto& [name, w] : workloads) steppers[name] = [&w] { return w.step(); };
    for (auto& [name, m] : small) steppers[name] = [&m] { return m.step(); };
    for (auto& [name, step] : steppers)
      for (int i = 0; i < warmup; ++i) step();
    std::printf("ready\n");
    std::fflush(stdout);

    std::string line;
    while (std::getline(std::cin, line)) {
      std::istringstream in(line);
      std::string name;
      int steps = 0;
      in >> name;
      if (name == "quit") break;
      const bool budget = name == "budget";
      double fraction = 0;
      if (budget) in >> name;
      in >> steps;
      if (budget) in >> fraction;
      auto it = steppers.find(name);
      if (it == steppers.end() || steps <= 0 || (budget && !(fraction > 0 && fraction <= 1))) {
        std::printf(
            "error: expected \"[budget] resnet32|mlp|lstm_cell|treelstm|lstm_lm|transformer_lm "
            "<steps> [fraction]\", "
            "got \"%s\"\n",
            line.c_str());
        std::fflush(stdout);
        continue;
      }
      if (budget) {
        std::printf("%s\n", budgeted_run(name, it->second, steps, fraction).c_str());
        std::fflush(stdout);
        continue;
      }
      std::string out = name;
      OpProfiler::reset();
      OpProfiler::enable(profile);
      for (int i = 0; i < steps; ++i) out += fmt::format(" {:.3f}", it->second());
      OpProfiler::enable(false);
      if (profile)
        std::fprintf(stderr, "%s: %d steps\n%s", name.c_str(), steps, OpProfiler::report().c_str());
      std::printf("%s\n", out.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_ours: %s\n", e.what());
    return 1;
  }
  return 0;
}
