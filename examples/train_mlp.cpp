// Trains a multi-layer perceptron on Fashion-MNIST (or, with --random-data, on a random
// classification task whose labels come from a fixed random "teacher") under a DTR budget.
// Under `mpirun -np N` it trains data-parallel, as train_resnet does (--batch-size per rank).
// Usage: train_mlp --epochs 1 --hidden 1024 --layers 2 --budget 0.5 [--random-data]
//        train_mlp --device cuda --random-data --steps 50 --budget 0.5
//        mpirun -np 2 train_mlp --threads 1 --random-data --steps 100
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "examples/common/device_flag.h"
#include "examples/common/dist_flags.h"
#include "examples/common/dtr_flags.h"
#include "examples/common/progress.h"
#include "examples/common/train_flags.h"
#include "nn/host_dataset.h"
#include "nn/nn.h"
#include "ops/loss.h"
#include "remat.h"

using namespace remat;

int main(int argc, char** argv) {
  ensure_thread_policy(argc, argv);
  CLI::App app{"Train an MLP on Fashion-MNIST or random data under a memory budget"};
  examples::TrainFlags f;
  f.model = "mlp", f.batch_size = 128, f.lr = 0.05;
  int layers = 2;
  std::int64_t hidden = 1024;
  bool random_data = false, profile = false;
  examples::DtrFlags dtr;
  examples::DistFlags dist_flags;
  examples::DeviceFlag device_flag;
  f.add_to(app);
  device_flag.add_to(app);
  app.add_option("--hidden", hidden, "units per hidden layer")
      ->check(examples::whole_in_range<std::int64_t>(1, 1 << 20));
  app.add_option("--layers", layers, "hidden layers")->check(examples::whole_in_range(1, 100000));
  app.add_flag("--random-data", random_data, "train on generated data instead of Fashion-MNIST");
  app.add_flag("--profile", profile,
               "print each op's calls and kernel time after the first two steps (on a GPU every "
               "call then waits for its kernels)");
  dtr.add_to(app);
  dist_flags.add_to(app);
  CLI11_PARSE(app, argc, argv);

  try {
    dist::Communicator& world = dist_flags.init();
    f.apply();
    const Device device = device_flag.get();
    const auto limit = &examples::TrainFlags::limit;
    std::shared_ptr<const nn::Dataset> train_set, test_set;
    if (random_data) {
      // Labels are the argmax of a fixed random linear map: a task an MLP can learn.
      auto make = [&](std::int64_t n, std::uint64_t s) {
        Tensor x = randn({n, 784}, {.seed = s});
        Tensor teacher = randn({784, 10}, {.seed = f.seed + 1000});
        return std::make_shared<nn::HostDataset>(
            nn::TensorDataset(x, argmax(matmul(x, teacher), 1)));
      };
      train_set = make(f.train_limit > 0 ? f.train_limit : 8192, f.seed + 1);
      test_set = make(f.test_limit > 0 ? f.test_limit : 2048, f.seed + 2);
    } else {
      // The data stays in host memory; only batches enter the budgeted pool.
      train_set = std::make_shared<nn::HostDataset>(
          nn::load_fashion_mnist(f.data_dir, nn::Split::Train, limit(f.train_limit)));
      test_set = std::make_shared<nn::HostDataset>(
          nn::load_fashion_mnist(f.data_dir, nn::Split::Test, limit(f.test_limit)));
    }
    nn::DataLoader train_loader(train_set, {.batch_size = f.batch_size,
                                            .shuffle = true,
                                            .drop_last = true,
                                            .seed = f.seed,
                                            .world_size = world.size(),
                                            .rank = world.rank()});
    nn::DataLoader test_loader(
        test_set, {.batch_size = f.batch_size, .world_size = world.size(), .rank = world.rank()});

    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Flatten>());
    std::int64_t width = 784;
    for (int l = 0; l < layers; ++l) {
      model->push_back(std::make_shared<nn::Linear>(width, hidden));
      model->push_back(std::make_shared<nn::ReLU>());
      width = hidden;
    }
    model->push_back(std::make_shared<nn::Linear>(width, 10));
    model->to(device);
    nn::SGD optimizer(model->parameters(), {.lr = f.lr, .momentum = 0.9});
    if (!f.resume_path.empty()) {
      nn::load(*model, f.resume_path);
      nn::load(optimizer, f.resume_path + ".optim");
    }
    dist::DistributedDataParallel ddp(model, world, dist_flags.options());

    Pool& pool = Pool::of(device);
    dtr.configure(pool);
    const long total = f.total_steps(train_loader.num_batches());
    examples::Progress progress(total);
    long step = 0;
    double loss_value = 0, acc = 0, train_ms = 0;
    std::vector<double> step_ms;
    for (int epoch = 0; epoch < f.epochs && step < total; ++epoch) {
      for (const auto& batch : train_loader) {
        if (step >= total) break;
        const auto t0 = std::chrono::steady_clock::now();
        {
          const Tensor inputs = to(batch.inputs, device), targets = to(batch.targets, device);
          Tensor logits = ddp(inputs);
          Tensor loss = cross_entropy(logits, targets);
          optimizer.zero_grad();
          backward(loss);
          loss_value = loss.item<double>();
          acc = mean(to_dtype(eq(argmax(logits, 1), targets), DType::Float32)).item<double>();
        }  // the step's graph is gone before the update, so parameters change in place
        optimizer.step();
        ++step;
        if (profile && step == 2) OpProfiler::enable();  // the steady steps only
        dtr.after_step(pool);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        train_ms += ms;
        step_ms.push_back(ms);
        progress.update(step, loss_value, acc, static_cast<double>(f.batch_size) * 1e3 / ms,
                        pool.resident_bytes());
      }
    }
    progress.finish();
    dtr.end_training(pool);
    OpProfiler::enable(false);  // the report covers training steps, not the evaluation
    const nlohmann::json dtr_json = examples::dtr_summary(pool, dtr);
    double counts[2] = {0, 0};  // correct, seen: over every rank's shard of the test set
    {
      NoGradGuard no_grad;
      for (const auto& batch : test_loader) {
        Tensor pred = argmax(model->forward(to(batch.inputs, device)), 1);
        counts[0] +=
            sum(to_dtype(eq(pred, to(batch.targets, device)), DType::Float64)).item<double>();
        counts[1] += static_cast<double>(batch.targets.numel());
      }
    }
    dist::allreduce_sum(world, counts, "test accuracy");
    const double correct = counts[0], seen = counts[1];
    if (!f.save_path.empty() && dist_flags.is_root()) {
      nn::save(*model, f.save_path);
      nn::save(optimizer, f.save_path + ".optim");
    }
    nlohmann::json summary = {
        {"model", f.model},
        {"steps", step},
        {"final_loss", loss_value},
        {"train_accuracy", acc},
        {"test_accuracy", seen > 0 ? correct / seen : 0.0},
        {"ms_per_step", step > 0 ? train_ms / static_cast<double>(step) : 0.0},
        {"median_ms_after_warmup", examples::median_after(step_ms, 2)},
        {"threads", f.threads},
        {"device", device.str()}};
    summary.update(dtr_json);
    summary.update(examples::DistFlags::summary(ddp));
    if (profile) std::fprintf(stderr, "%s\n", OpProfiler::report(40).c_str());
    std::printf("%s\n", summary.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    return dist_flags.fail(1);
  }
  return 0;
}
