// The flags of a training example's run that are not about the model: --seed, --threads,
// --save and --resume of one model and its optimizer (MODEL and MODEL.optim).
// Usage: RunFlags run; run.add_to(app); CLI11_PARSE(app, argc, argv);
//        run.begin();  ... run.resume(model, opt); ... train ... run.save(model, opt);
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "core/parallel.h"
#include "core/random.h"
#include "examples/common/flag_checks.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/serialize.h"

namespace remat::examples {

struct RunFlags {
  std::string seed_help = "seed for initialisation and data order";
  std::uint64_t seed = 0;
  int threads = num_threads();
  std::string save_path, resume_path;

  void add_to(CLI::App& app) {
    app.add_option("--seed", seed, seed_help);
    app.add_option("--threads", threads, "CPU threads")->check(whole_in_range(1, max_threads()));
    app.add_option("--save", save_path, "save model and optimizer state here at the end");
    app.add_option("--resume", resume_path, "load model and optimizer state from here first");
  }
  // Sets the threads and the seed; refuses a --save path that cannot be written before any work.
  void begin() const {
    set_num_threads(threads);
    manual_seed(seed);
    if (!save_path.empty())
      nn::check_save_path(save_path), nn::check_save_path(save_path + ".optim");
  }
  void resume(nn::Module& model, nn::Optimizer& optimizer) const {
    if (resume_path.empty()) return;
    nn::load(model, resume_path);
    nn::load(optimizer, resume_path + ".optim");
  }
  void save(const nn::Module& model, const nn::Optimizer& optimizer) const {
    if (save_path.empty()) return;
    nn::save(model, save_path);
    nn::save(optimizer, save_path + ".optim");
  }
};

}  // namespace remat::examples
