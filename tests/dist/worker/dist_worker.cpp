// The program tests/dist runs under `mpirun -np N` (and alone, for the one-process reference):
//   dist_worker train --batch B --steps S [--budget none|0.5|BYTES] --out params.bin
//     trains a small MLP data-parallel (each rank B examples of every global batch), rank 0
//     writes the final parameters (raw float32, in order) to --out and prints a JSON line;
//   dist_worker stall --timeout T   rank 1 sleeps past the timeout before an allreduce;
//   dist_worker die                 rank 1 is killed (SIGKILL) before an allreduce;
//   dist_worker quit                rank 1 exits normally (status 3) before an allreduce.
#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>

#include "dist/dist.h"
#include "nn/nn.h"
#include "ops/loss.h"
#include "remat.h"

using namespace remat;

namespace {

constexpr std::int64_t kExamples = 1280, kFeatures = 4, kHidden = 16, kLayers = 12, kClasses = 4;

// Inputs from a fixed seed, labels from a fixed linear rule: the same data on every rank.
nn::TensorDataset make_data() {
  manual_seed(99);
  NoGradGuard no_grad;
  Tensor x = randn({kExamples, kFeatures});
  Tensor y = argmax(matmul(x, randn({kFeatures, kClasses})), 1);
  return nn::TensorDataset(x, y);
}

int train(dist::Communicator& world, std::int64_t batch, long steps, const std::string& budget,
          const std::string& out) {
  nn::TensorDataset data = make_data();
  // Each rank starts from different weights: the broadcast must make them rank 0's.
  manual_seed(1 + static_cast<std::uint64_t>(world.rank()));
  // Deep and narrow, so activations (what a budget evicts) outweigh parameters.
  auto model = std::make_shared<nn::Sequential>();
  for (std::int64_t l = 0; l < kLayers; ++l) {
    model->push_back(std::make_shared<nn::Linear>(l == 0 ? kFeatures : kHidden, kHidden));
    model->push_back(std::make_shared<nn::Tanh>());
  }
  model->push_back(std::make_shared<nn::Linear>(kHidden, kClasses));
  // Small buckets, so a pass reduces several while backward goes on.
  dist::DistributedDataParallel ddp(model, world, {.bucket_bytes = 1024});
  nn::SGD optimizer(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  nn::DataLoader loader(std::move(data), {.batch_size = batch,
                                          .shuffle = true,
                                          .drop_last = true,
                                          .seed = 5,
                                          .world_size = world.size(),
                                          .rank = world.rank()});
  Pool& pool = Pool::of(Device::cpu());
  const BudgetSpec spec = parse_budget(budget);
  if (spec.fraction) pool.set_budget_fraction(*spec.fraction);
  if (spec.bytes) pool.set_budget(*spec.bytes);
  long step = 0;
  double loss_value = 0;
  while (step < steps) {
    for (const auto& b : loader) {
      if (step >= steps) break;
      {
        Tensor loss = cross_entropy(ddp(b.inputs), b.targets);
        optimizer.zero_grad();
        backward(loss);
        loss_value = loss.item<double>();
      }
      optimizer.step();
      pool.end_step();
      ++step;
    }
  }
  if (world.rank() == 0) {
    std::ofstream file(out, std::ios::binary);
    for (const Tensor& p : model->parameters()) {
      const auto v = p.to_vector<float>();
      file.write(reinterpret_cast<const char*>(v.data()),
                 static_cast<std::streamsize>(v.size() * sizeof(float)));
    }
    REMAT_CHECK(file.good(), "dist_worker: cannot write {}", out);
    const DtrStats s = pool.stats();
    std::printf(
        "{\"world_size\": %d, \"buckets\": %zu, \"reductions\": %lld, \"loss\": %.6f, "
        "\"evictions\": %lld, \"peak_resident_bytes\": %zu}\n",
        world.size(), ddp.num_buckets(), static_cast<long long>(ddp.stats().reductions), loss_value,
        static_cast<long long>(s.evictions), s.peak_resident_bytes);
  }
  return 0;
}

enum class Fault { Stall, Die, Quit };

// One allreduce that rank 1 reaches only after `delay`, or never (it dies or exits).
int allreduce_with_fault(dist::Communicator& world, Fault fault, double delay) {
  if (world.rank() == 1) {
    if (fault == Fault::Die) {
      std::fprintf(stderr, "dist_worker: rank 1 is killed before the allreduce\n");
      std::raise(SIGKILL);
    }
    if (fault == Fault::Quit) {
      std::fprintf(stderr, "dist_worker: rank 1 exits before the allreduce\n");
      std::exit(3);  // MPI is finalised at exit: the launcher sees a clean exit
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
  }
  double value = world.rank();
  dist::allreduce_sum(world, std::span<double>(&value, 1), "dist_worker's allreduce");
  std::printf("rank %d: sum %.0f\n", world.rank(), value);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Data-parallel test worker"};
  app.require_subcommand(1);
  std::int64_t batch = 8;
  long steps = 4;
  std::string budget = "none", out = "params.bin";
  double timeout = 60, delay = 30;
  auto* train_cmd = app.add_subcommand("train", "train an MLP data-parallel");
  train_cmd->add_option("--batch", batch, "examples per rank per step");
  train_cmd->add_option("--steps", steps, "steps");
  train_cmd->add_option("--budget", budget, "budget per rank: none, a fraction, or bytes");
  train_cmd->add_option("--out", out, "where rank 0 writes the parameters");
  auto* stall_cmd = app.add_subcommand("stall", "rank 1 is late for an allreduce");
  stall_cmd->add_option("--delay", delay, "seconds rank 1 sleeps");
  auto* die_cmd = app.add_subcommand("die", "rank 1 is killed before an allreduce");
  auto* quit_cmd = app.add_subcommand("quit", "rank 1 exits before an allreduce");
  app.add_option("--timeout", timeout, "collective timeout in seconds");
  CLI11_PARSE(app, argc, argv);
  set_num_threads(1);
  dist::Communicator* world = nullptr;
  try {
    world = &dist::init({.timeout = std::chrono::duration<double>(timeout)});
    if (*train_cmd) return train(*world, batch, steps, budget, out);
    const Fault fault = *die_cmd ? Fault::Die : *quit_cmd ? Fault::Quit : Fault::Stall;
    return allreduce_with_fault(*world, fault, delay);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_worker: %s\n", e.what());
    if (world != nullptr && world->size() > 1) world->abort(1);
    return 1;
  }
}
