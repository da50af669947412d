// Trains a two-layer MLP on a random classification task (labels from a fixed random "teacher"
// network), printing a progress line per step and a final one-line JSON summary.
// Usage: train_mlp --steps 200 --batch-size 64 --hidden 256 --lr 0.1 --seed 1 --threads 1
#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "remat.h"

using namespace remat;

int main(int argc, char** argv) {
  ensure_passive_threads(argc, argv);
  CLI::App app{"Train a two-layer MLP on random data"};
  int steps = 200, batch = 64, in_dim = 32, hidden = 256, classes = 10, threads = num_threads();
  double lr = 0.1;
  std::uint64_t seed = 1;
  app.add_option("--steps", steps, "training steps")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", batch, "examples per step")->check(CLI::PositiveNumber);
  app.add_option("--hidden", hidden, "hidden units")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "SGD learning rate")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "random seed");
  app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  set_num_threads(threads);
  manual_seed(seed);

  // The task: labels are the argmax of a fixed random linear map of the input.
  Tensor teacher = randn({in_dim, classes}, {.seed = seed + 1000});
  // Parameters, initialised as PyTorch's Linear (uniform in +-1/sqrt(fan_in)).
  auto init = [&](Shape shape, std::int64_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    return uniform(shape, -bound, bound, {.requires_grad = true});
  };
  std::vector<Tensor> params = {init({hidden, in_dim}, in_dim), init({hidden}, in_dim),
                                init({classes, hidden}, hidden), init({classes}, hidden)};

  Pool& pool = Pool::of(Device::cpu());
  pool.reset_peak();
  double loss_value = 0, accuracy = 0, total_ms = 0;
  for (int step = 1; step <= steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor x = randn({batch, in_dim});
    Tensor y = argmax(matmul(x, teacher), 1);
    Tensor logits = linear(relu(linear(x, params[0], params[1])), params[2], params[3]);
    Tensor loss = cross_entropy(logits, y);
    backward(loss);
    {
      NoGradGuard no_grad;
      for (auto& p : params) {
        p = detach(sub(p, mul(p.grad(), lr))).set_requires_grad(true);
      }
    }
    const auto t1 = std::chrono::steady_clock::now();
    total_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
    loss_value = loss.item<double>();
    accuracy = mean(to_dtype(eq(argmax(logits, 1), y), DType::Float32)).item<double>();
    if (step == 1 || step % 20 == 0 || step == steps)
      std::printf("step %4d  loss %.4f  batch accuracy %.3f  resident %.1f KiB\n", step, loss_value,
                  accuracy, pool.resident_bytes() / 1024.0);
  }
  nlohmann::json summary = {
      {"model", "mlp"},
      {"steps", steps},
      {"final_loss", loss_value},
      {"train_accuracy", accuracy},
      {"ms_per_step", total_ms / steps},
      {"peak_resident_bytes", pool.peak_resident_bytes()},
      {"budget_bytes", nullptr},
  };
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}
