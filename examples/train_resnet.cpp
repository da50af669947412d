// Trains a ResNet on Fashion-MNIST under a DTR memory budget, then evaluates it on the test set.
// The default budget is 0.5: half of the unbudgeted steady-state peak, measured on the second step.
// --checkpoint-stages checkpoints each stage by hand instead (convolutions kept, the element-wise
// work recomputed) and prints what the checkpoints kept and replayed in the last step.
// --plot draws the pool's memory over one budgeted step and the loss and test accuracy (PNG).
// Under `mpirun -np N` it trains data-parallel: each rank takes --batch-size examples of every
// global batch of N x --batch-size, under its own --budget; rank 0 prints and saves.
// Usage: train_resnet --model resnet20 --epochs 1 --budget 0.5 [--steps N] [--save ckpt.bin]
//        train_resnet --budget none --checkpoint-stages --steps 30
//        train_resnet --steps 40 --train-limit 2560 --plot run.png
//        mpirun -np 2 train_resnet --threads 1 --batch-size 32 --budget 0.5
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "examples/common/dist_flags.h"
#include "examples/common/dtr_flags.h"
#include "examples/common/progress.h"
#include "examples/common/train_flags.h"
#include "examples/common/training_plot.h"
#include "models/resnet.h"
#include "nn/host_dataset.h"
#include "nn/nn.h"
#include "ops/loss.h"
#include "remat.h"

using namespace remat;

namespace {

double accuracy_of(const Tensor& logits, const Tensor& targets) {
  return mean(to_dtype(eq(argmax(logits, 1), targets), DType::Float32)).item<double>();
}

// Accuracy over the loader's examples; with a communicator, over every rank's shard of them.
double evaluate(nn::Module& model, nn::DataLoader& loader, dist::Communicator* ranks = nullptr) {
  NoGradGuard no_grad;
  model.eval();
  double counts[2] = {0, 0};  // correct, seen
  for (const auto& batch : loader) {
    Tensor logits = model.forward(batch.inputs);
    const double n = static_cast<double>(batch.targets.numel());
    counts[0] += accuracy_of(logits, batch.targets) * n;
    counts[1] += n;
  }
  model.train();
  if (ranks != nullptr) dist::allreduce_sum(*ranks, counts, "test accuracy");
  return counts[1] > 0 ? counts[0] / counts[1] : 0;
}

// Every test-accuracy point of --plot reads this many test images (about 16 forward batches).
constexpr std::int64_t kCurveImages = 1000;

// The steps after which --plot's test curve is taken: `points` evenly spaced ones ending at the
// last step, none before `first` (so no evaluation runs while the unbudgeted peak is measured).
std::set<long> curve_steps(long total, int points, long first) {
  std::set<long> steps;
  for (int k = 1; k <= points; ++k) {
    const long s = (total * k + points - 1) / points;
    if (s >= first && s >= 1) steps.insert(s);
  }
  return steps;
}

}  // namespace

int main(int argc, char** argv) {
  ensure_thread_policy(argc, argv);
  CLI::App app{"Train a ResNet on Fashion-MNIST under a memory budget"};
  examples::TrainFlags f;
  f.model = "resnet20", f.batch_size = 64, f.lr = 0.1;
  long warmup = 100;
  double momentum = 0.9, weight_decay = 5e-4;
  bool augment = false, checkpoint_stages = false;
  examples::DtrFlags dtr;
  dtr.budget = "0.5";
  examples::DistFlags dist_flags;
  std::string plot_path;
  long plot_step = 0;
  int plot_points = 4;
  f.add_to(app);
  app.add_option("--momentum", momentum, "SGD (Nesterov) momentum")
      ->check(examples::real_in_range(0, true, 1, "a number from 0 to 1"));
  app.add_option("--weight-decay", weight_decay, "L2 weight decay")
      ->check(examples::non_negative_real());
  app.add_option("--warmup", warmup, "warm-up steps (linear, then cosine decay)")
      ->check(examples::whole_in_range(0L, examples::kMaxSteps));
  app.add_flag("--augment", augment, "random crops (padding 2) and horizontal flips");
  app.add_flag(
      "--checkpoint-stages", checkpoint_stages,
      "checkpoint each ResNet stage: convolutions kept, batch norm, ReLU and add recomputed");
  app.add_option("--plot", plot_path,
                 "draw memory over one training step (against the budget and an unbudgeted step) "
                 "and the loss and test accuracy into this PNG with gnuplot; the numbers go to "
                 "PATH.dat ('' or absent: no plot)");
  app.add_option("--plot-step", plot_step,
                 "the step whose memory --plot draws (0: the fifth, or the last when fewer)")
      ->check(examples::whole_in_range(0L, examples::kMaxSteps));
  app.add_option("--plot-points", plot_points,
                 "test-accuracy points --plot draws, evenly spaced, each on the first 1000 test "
                 "images (0: none)")
      ->check(examples::whole_in_range(0, 1000));
  dtr.add_to(app);
  dist_flags.add_to(app);
  CLI11_PARSE(app, argc, argv);

  try {
    dist::Communicator& world = dist_flags.init();
    f.apply();
    examples::TrainingPlot plot;
    plot.path = world.rank() == 0 ? plot_path : "";  // rank 0 draws
    const bool plotting = !plot.path.empty();
    if (plotting) plot.check_path();
    const auto limit = &examples::TrainFlags::limit;
    // The data stays in host memory; only batches enter the budgeted pool.
    nn::HostDataset train_set(
        nn::load_fashion_mnist(f.data_dir, nn::Split::Train, limit(f.train_limit)));
    nn::HostDataset test_set(
        nn::load_fashion_mnist(f.data_dir, nn::Split::Test, limit(f.test_limit)));
    // Fashion-MNIST's pixel mean and standard deviation.
    auto normalize =
        std::make_shared<nn::Normalize>(std::vector<double>{0.2860}, std::vector<double>{0.3530});
    std::shared_ptr<const nn::Transform> train_transform = normalize;
    if (augment) {
      train_transform =
          std::make_shared<nn::Compose>(std::vector<std::shared_ptr<const nn::Transform>>{
              std::make_shared<nn::RandomCrop>(28, 2, f.seed),
              std::make_shared<nn::RandomHorizontalFlip>(0.5, f.seed + 1), normalize});
    }
    nn::DataLoader train_loader(std::move(train_set), {.batch_size = f.batch_size,
                                                       .shuffle = true,
                                                       .drop_last = true,
                                                       .seed = f.seed,
                                                       .transform = train_transform,
                                                       .world_size = world.size(),
                                                       .rank = world.rank()});
    // Evaluation batches match the training ones, so evaluation fits in the same budget; each
    // rank evaluates its shard of the test set.
    nn::DataLoader test_loader(std::move(test_set), {.batch_size = f.batch_size,
                                                     .transform = normalize,
                                                     .world_size = world.size(),
                                                     .rank = world.rank()});
    // --plot's test curve: the first images of the test set, a tenth of it by default.
    const std::int64_t curve_images =
        f.test_limit > 0 ? std::min(f.test_limit, kCurveImages) : kCurveImages;
    std::optional<nn::DataLoader> curve_loader;
    if (plotting && plot_points > 0)
      curve_loader.emplace(
          nn::HostDataset(nn::load_fashion_mnist(f.data_dir, nn::Split::Test, curve_images)),
          nn::DataLoaderOptions{.batch_size = f.batch_size, .transform = normalize});

    auto model = models::resnet(
        f.model, {.in_channels = 1, .num_classes = 10, .checkpoint_stages = checkpoint_stages});
    nn::SGD optimizer(
        model->parameters(),
        {.lr = f.lr, .momentum = momentum, .weight_decay = weight_decay, .nesterov = momentum > 0});
    const long total = f.total_steps(train_loader.num_batches());
    const long warm = std::min<long>(warmup, std::max<long>(total - 1, 0));
    auto schedule = nn::warmup_cosine(optimizer, warm, 0.1, std::max<long>(total - warm, 1));
    if (!f.resume_path.empty()) {
      nn::load(*model, f.resume_path);
      nn::load(optimizer, f.resume_path + ".optim");
      std::printf("resumed from %s\n", f.resume_path.c_str());
    }
    // Copies rank 0's parameters to every rank, then averages gradients after each backward
    // (a group of one: a pass-through).
    dist::DistributedDataParallel ddp(model, world, dist_flags.options());

    // --plot's steps: the one drawn, and the measured unbudgeted one to compare it with.
    if (plotting && plot_step > total)
      throw Error(
          fmt::format("--plot-step {} is past the last step of the run ({})", plot_step, total));
    const long drawn_step = plot_step > 0 ? plot_step : std::min<long>(5, total);
    const long measured_step = examples::DtrFlags::kMeasureStep;
    const bool fractional = parse_budget(dtr.budget).fraction.has_value();
    const long reference_step = fractional && drawn_step > measured_step ? measured_step : 0;
    const std::set<long> curve_at =
        curve_loader ? curve_steps(total, plot_points, fractional ? measured_step + 1 : 1)
                     : std::set<long>{};

    Pool& pool = Pool::of(Device::cpu());
    dtr.configure(pool);
    std::printf("%s on Fashion-MNIST: %ld steps of %lld, %d thread(s), budget %s, heuristic %s%s\n",
                f.model.c_str(), total, static_cast<long long>(f.batch_size), f.threads,
                dtr.spec.str().c_str(), dtr.heuristic.c_str(),
                checkpoint_stages ? ", checkpointed stages" : "");
    if (world.size() > 1)
      std::printf(
          "data-parallel over %d ranks: %lld examples a step in all, %zu gradient "
          "buckets; budget and numbers per rank (rank 0's shown)\n",
          world.size(), static_cast<long long>(f.batch_size * world.size()), ddp.num_buckets());
    examples::Progress progress(total);
    long step = 0;
    double loss_value = 0, acc = 0, train_ms = 0;
    double curve_seconds = 0;          // the test curve's evaluations, outside the training time
    std::vector<DtrStats> curve_work;  // and their DTR work, outside the summary's counters
    const auto start = std::chrono::steady_clock::now();
    for (int epoch = 0; epoch < f.epochs && step < total; ++epoch) {
      for (const auto& batch : train_loader) {
        if (step >= total) break;
        const bool timed = plotting && (step + 1 == drawn_step || step + 1 == reference_step);
        if (timed) pool.start_timeline();
        const auto t0 = std::chrono::steady_clock::now();
        reset_checkpoint_report();  // the summary shows the last step's
        {
          Tensor logits = ddp(batch.inputs);
          Tensor loss = cross_entropy(logits, batch.targets);
          optimizer.zero_grad();
          backward(loss);
          loss_value = loss.item<double>();
          acc = accuracy_of(logits, batch.targets);
        }  // the step's graph is gone before the update, so parameters change in place
        optimizer.step();
        schedule->step();
        ++step;
        if (timed) {
          examples::StepTimeline t{step, pool.stop_timeline()};
          if (step == reference_step) {
            plot.reference = std::move(t);
          } else {
            plot.step = std::move(t);
            plot.budget = pool.budget();
            plot.step_budgeted = pool.budget().has_value();
          }
        }
        if (plotting) plot.losses.push_back(loss_value);
        dtr.after_step(pool);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        train_ms += ms;
        progress.update(step, loss_value, acc, static_cast<double>(f.batch_size) * 1e3 / ms,
                        pool.resident_bytes());
        if (curve_at.count(step)) {
          const DtrStats before = pool.stats();
          const auto e0 = std::chrono::steady_clock::now();
          plot.test_curve.emplace_back(step, evaluate(*model, *curve_loader));
          curve_seconds +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
          curve_work.push_back(pool.stats().since(before));
        }
      }
    }
    progress.finish();
    dtr.end_training(pool);
    const double train_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
        curve_seconds;
    DtrStats training = pool.stats();  // training steps only
    for (const DtrStats& w : curve_work) training = training.since(w);
    const nlohmann::json dtr_json = examples::dtr_summary(training, dtr);
    const double test_accuracy = evaluate(*model, test_loader, &world);
    if (!f.save_path.empty() && dist_flags.is_root()) {  // every rank holds the same state
      nn::save(*model, f.save_path);
      nn::save(optimizer, f.save_path + ".optim");
    }
    if (dtr.unbudgeted_peak)
      std::printf("peak resident: %.1f MiB unbudgeted, %.1f MiB under the budget\n",
                  *dtr.unbudgeted_peak / 1048576.0,
                  dtr_json["peak_resident_bytes"].get<double>() / 1048576.0);
    std::printf("trained %ld steps in %.1f s; test accuracy %.4f\n", step, train_seconds,
                test_accuracy);
    if (checkpoint_stages)
      std::printf("checkpoints of the last step:\n%s", checkpoint_report().to_string().c_str());
    bool drew_plot = false;
    if (plotting && dist_flags.is_root()) {
      plot.test_curve_images = static_cast<long>(curve_images);
      plot.final_test = {static_cast<long>(test_loader.dataset().size()), test_accuracy};
      plot.title = fmt::format("{} on Fashion-MNIST, batch {}, budget {}, heuristic {}", f.model,
                               f.batch_size, dtr.spec.str(), dtr.heuristic);
      if (!plot.test_curve.empty())
        std::printf("plot: %zu test-accuracy points on the first %ld test images took %.1f s\n",
                    plot.test_curve.size(), plot.test_curve_images, curve_seconds);
      std::string why;
      drew_plot = plot.draw(&why);
      std::fflush(stdout);  // the lines keep their order when both streams go to one file
      if (drew_plot)
        std::printf("plot: wrote %s (numbers in %s)\n", plot.path.c_str(),
                    plot.data_path().c_str());
      else
        std::fprintf(stderr, "train_resnet: no plot: %s\n", why.c_str());
    }
    nlohmann::json summary = {
        {"model", f.model},
        {"steps", step},
        {"final_loss", loss_value},
        {"train_accuracy", acc},
        {"test_accuracy", test_accuracy},
        {"ms_per_step", step > 0 ? train_ms / static_cast<double>(step) : 0.0},
        {"train_seconds", train_seconds},
        {"threads", f.threads},
        {"checkpoint_stages", checkpoint_stages},
        {"plot", drew_plot ? nlohmann::json(plot.path) : nlohmann::json(nullptr)},
        {"plot_eval_seconds", curve_seconds}};
    summary.update(dtr_json);
    summary.update(examples::DistFlags::summary(ddp));
    std::printf("%s\n", summary.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_resnet: %s\n", e.what());
    return dist_flags.fail(1);
  }
  return 0;
}
