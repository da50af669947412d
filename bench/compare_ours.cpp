// Our half of bench/compare_torch.sh: times training steps of the CIFAR ResNet-32 (batch 32,
// 3x32x32) and of a 784-1024-1024-10 MLP (batch 128), both SGD with momentum 0.9 and cross
// entropy, on demand, so the script can alternate us and PyTorch in rounds.  bench/compare_torch.py
// is the same program written with PyTorch; keep the two in step.
// Protocol: prints "ready" after warm-up; then each stdin line "<resnet32|mlp> <steps>" runs that
// many steps and prints "<model> <ms> <ms> ..."; "quit" or end of input stops.
// Usage: echo "mlp 5" | compare_ours --threads 1
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
  ensure_passive_threads(argc, argv);
  CLI::App app{
      "Timed training steps of ResNet-32 and an MLP, served on stdin for compare_torch.sh"};
  int threads = 1, warmup = 3;
  app.add_option("--threads", threads, "CPU threads")
      ->check(examples::whole_in_range(1, max_threads()));
  app.add_option("--warmup", warmup, "untimed steps of each model before \"ready\"")
      ->check(examples::whole_in_range(0, 1'000'000));
  CLI11_PARSE(app, argc, argv);

  try {
    set_num_threads(threads);
    manual_seed(0);
    std::map<std::string, Workload> workloads;
    workloads.emplace("resnet32",
                      make(models::resnet("resnet32", {.in_channels = 3, .num_classes = 10}),
                           randn({32, 3, 32, 32}, {.seed = 1}), 32));
    auto mlp = std::make_shared<nn::Sequential>(
        std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(1024, 1024), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(1024, 10));
    workloads.emplace("mlp", make(mlp, randn({128, 784}, {.seed = 1}), 128));
    for (auto& [name, w] : workloads)
      for (int i = 0; i < warmup; ++i) w.step();
    std::printf("ready\n");
    std::fflush(stdout);

    std::string line;
    while (std::getline(std::cin, line)) {
      std::istringstream in(line);
      std::string name;
      int steps = 0;
      in >> name >> steps;
      if (name == "quit") break;
      auto it = workloads.find(name);
      if (it == workloads.end() || steps <= 0) {
        std::printf("error: expected \"resnet32|mlp <steps>\", got \"%s\"\n", line.c_str());
        std::fflush(stdout);
        continue;
      }
      std::string out = name;
      for (int i = 0; i < steps; ++i) out += fmt::format(" {:.3f}", it->second.step());
      std::printf("%s\n", out.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_ours: %s\n", e.what());
    return 1;
  }
  return 0;
}
