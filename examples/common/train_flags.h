// The flags every training example shares: --model --epochs --steps --batch-size --lr --seed
// --threads --data-dir --train-limit --test-limit --save --resume.
// Usage: TrainFlags f; f.model = "resnet20"; f.add_to(app); ... f.total_steps(batches)
#pragma once
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "core/parallel.h"
#include "core/random.h"
#include "examples/common/flag_checks.h"
#include "nn/mnist.h"
#include "nn/serialize.h"

namespace remat::examples {

struct TrainFlags {
  std::string model;
  std::int64_t batch_size = 128;
  double lr = 0.1;
  int epochs = 1;
  long steps = 0;
  std::uint64_t seed = 0;
  int threads = num_threads();
  std::string data_dir = nn::kFashionMnistDir;
  std::int64_t train_limit = 0, test_limit = 0;
  std::string save_path, resume_path;

  void add_to(CLI::App& app) {
    app.add_option("--model", model, "the model to train");
    app.add_option("--epochs", epochs, "passes over the training set")
        ->check(whole_in_range(1, 1'000'000));
    app.add_option("--steps", steps, "stop after this many steps (0: run every epoch)")
        ->check(whole_in_range(0L, kMaxSteps));
    app.add_option("--batch-size", batch_size, "examples per step")
        ->check(whole_in_range<std::int64_t>(1, kMaxCount));
    app.add_option("--lr", lr, "learning rate")->check(positive_real());
    app.add_option("--seed", seed, "seed for initialisation, data order and augmentation")
        ->check(whole_in_range<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max()));
    app.add_option("--threads", threads, "CPU threads")->check(whole_in_range(1, max_threads()));
    app.add_option("--data-dir", data_dir, "folder with the Fashion-MNIST IDX files");
    app.add_option("--train-limit", train_limit, "use only the first N training examples (0: all)")
        ->check(whole_in_range<std::int64_t>(0, kMaxCount));
    app.add_option("--test-limit", test_limit, "evaluate on the first N test examples (0: all)")
        ->check(whole_in_range<std::int64_t>(0, kMaxCount));
    app.add_option("--save", save_path,
                   "save model and optimizer state here at the end (checked before training)");
    app.add_option("--resume", resume_path, "load model and optimizer state from here first");
  }
  // Applies --threads and --seed to the process.
  // A --save path that cannot be written fails here, before training, not after it.
  void apply() const {
    set_num_threads(threads);
    manual_seed(seed);
    if (!save_path.empty()) {
      nn::check_save_path(save_path);
      nn::check_save_path(save_path + ".optim");
    }
  }
  static std::optional<std::int64_t> limit(std::int64_t n) {
    return n > 0 ? std::optional<std::int64_t>(n) : std::nullopt;
  }
  // Steps to run: every epoch, or --steps when that is fewer.
  long total_steps(std::int64_t batches_per_epoch) const {
    const long all = static_cast<long>(epochs) * batches_per_epoch;
    return steps > 0 ? std::min(steps, all) : all;
  }
};

}  // namespace remat::examples
