// Trains a ResNet on Fashion-MNIST under a DTR memory budget, then evaluates it on the test set.
// The default budget is 0.5: half of the unbudgeted peak, measured on the first step.
// Usage: train_resnet --model resnet20 --epochs 1 --budget 0.5 [--steps N] [--save ckpt.bin]
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "examples/common/dtr_flags.h"
#include "examples/common/progress.h"
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

double evaluate(nn::Module& model, nn::DataLoader& loader) {
  NoGradGuard no_grad;
  model.eval();
  double correct = 0, seen = 0;
  for (const auto& batch : loader) {
    Tensor logits = model.forward(batch.inputs);
    const double n = static_cast<double>(batch.targets.numel());
    correct += accuracy_of(logits, batch.targets) * n;
    seen += n;
  }
  model.train();
  return seen > 0 ? correct / seen : 0;
}

}  // namespace

int main(int argc, char** argv) {
  ensure_passive_threads(argc, argv);
  CLI::App app{"Train a ResNet on Fashion-MNIST under a memory budget"};
  std::string model_name = "resnet20", data_dir = nn::kFashionMnistDir, save_path, resume_path;
  int epochs = 1, threads = num_threads();
  long steps = 0, warmup = 100;
  std::int64_t batch_size = 64, train_limit = 0, test_limit = 0;
  double lr = 0.1, momentum = 0.9, weight_decay = 5e-4;
  std::uint64_t seed = 0;
  bool augment = false;
  examples::DtrFlags dtr;
  dtr.budget = "0.5";
  app.add_option("--model", model_name, "resnet20/32/44/56/110/1202 or resnet18/34/50");
  app.add_option("--epochs", epochs, "passes over the training set")->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "stop after this many steps (0: run every epoch)")->check(CLI::NonNegativeNumber);
  app.add_option("--batch-size", batch_size, "examples per step")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "peak learning rate (linear warm-up, then cosine decay)")->check(CLI::PositiveNumber);
  app.add_option("--momentum", momentum, "SGD (Nesterov) momentum")->check(CLI::Range(0.0, 1.0));
  app.add_option("--weight-decay", weight_decay, "L2 weight decay")->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", warmup, "warm-up steps")->check(CLI::NonNegativeNumber);
  app.add_option("--seed", seed, "seed for initialisation, shuffling and augmentation");
  app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
  app.add_option("--data-dir", data_dir, "folder with the Fashion-MNIST IDX files");
  app.add_option("--train-limit", train_limit, "use only the first N training images (0: all)");
  app.add_option("--test-limit", test_limit, "evaluate on the first N test images (0: all)");
  app.add_flag("--augment", augment, "random crops (padding 2) and horizontal flips");
  app.add_option("--save", save_path, "save model and optimizer state here at the end");
  app.add_option("--resume", resume_path, "load model and optimizer state from here first");
  dtr.add_to(app);
  CLI11_PARSE(app, argc, argv);

  try {
    set_num_threads(threads);
    manual_seed(seed);
    const auto limit = [](std::int64_t n) { return n > 0 ? std::optional<std::int64_t>(n) : std::nullopt; };
    // The data stays in host memory; only batches enter the budgeted pool.
    nn::HostDataset train_set(nn::load_fashion_mnist(data_dir, nn::Split::Train, limit(train_limit)));
    nn::HostDataset test_set(nn::load_fashion_mnist(data_dir, nn::Split::Test, limit(test_limit)));
    // Fashion-MNIST's pixel mean and standard deviation.
    auto normalize = std::make_shared<nn::Normalize>(std::vector<double>{0.2860}, std::vector<double>{0.3530});
    std::shared_ptr<const nn::Transform> train_transform = normalize;
    if (augment) {
      train_transform = std::make_shared<nn::Compose>(std::vector<std::shared_ptr<const nn::Transform>>{
          std::make_shared<nn::RandomCrop>(28, 2, seed), std::make_shared<nn::RandomHorizontalFlip>(0.5, seed + 1),
          normalize});
    }
    nn::DataLoader train_loader(std::move(train_set), {.batch_size = batch_size, .shuffle = true, .drop_last = true,
                                                       .seed = seed, .transform = train_transform});
    // Evaluation batches match the training ones, so evaluation fits in the same budget.
    nn::DataLoader test_loader(std::move(test_set), {.batch_size = batch_size, .transform = normalize});

    auto model = models::resnet(model_name, {.in_channels = 1, .num_classes = 10});
    nn::SGD optimizer(model->parameters(), {.lr = lr, .momentum = momentum, .weight_decay = weight_decay,
                                            .nesterov = momentum > 0});
    const long total = steps > 0 ? std::min<long>(steps, epochs * train_loader.num_batches())
                                 : epochs * train_loader.num_batches();
    const long warm = std::min<long>(warmup, std::max<long>(total - 1, 0));
    auto schedule = nn::warmup_cosine(optimizer, warm, 0.1, std::max<long>(total - warm, 1));
    if (!resume_path.empty()) {
      nn::load(*model, resume_path);
      nn::load(optimizer, resume_path + ".optim");
      std::printf("resumed from %s\n", resume_path.c_str());
    }

    Pool& pool = Pool::of(Device::cpu());
    dtr.configure(pool);
    std::printf("%s on Fashion-MNIST: %ld steps of %lld, %d thread(s), budget %s, heuristic %s\n",
                model_name.c_str(), total, static_cast<long long>(batch_size), threads, dtr.spec.str().c_str(),
                dtr.heuristic.c_str());
    examples::Progress progress(total);
    long step = 0;
    double loss_value = 0, acc = 0, train_ms = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int epoch = 0; epoch < epochs && step < total; ++epoch) {
      for (const auto& batch : train_loader) {
        if (step >= total) break;
        const auto t0 = std::chrono::steady_clock::now();
        {
          Tensor logits = model->forward(batch.inputs);
          Tensor loss = cross_entropy(logits, batch.targets);
          optimizer.zero_grad();
          backward(loss);
          loss_value = loss.item<double>();
          acc = accuracy_of(logits, batch.targets);
        }  // the step's graph is gone before the update, so parameters change in place
        optimizer.step();
        schedule->step();
        ++step;
        dtr.after_step(pool);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        train_ms += ms;
        progress.update(step, loss_value, acc, static_cast<double>(batch_size) * 1e3 / ms, pool.resident_bytes());
      }
    }
    progress.finish();
    const double train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const nlohmann::json dtr_json = examples::dtr_summary(pool, dtr);  // training steps only
    const double test_accuracy = evaluate(*model, test_loader);
    if (!save_path.empty()) {
      nn::save(*model, save_path);
      nn::save(optimizer, save_path + ".optim");
    }
    if (dtr.unbudgeted_peak)
      std::printf("peak resident: %.1f MiB unbudgeted (first step), %.1f MiB under the budget\n",
                  *dtr.unbudgeted_peak / 1048576.0, dtr_json["peak_resident_bytes"].get<double>() / 1048576.0);
    std::printf("trained %ld steps in %.1f s; test accuracy %.4f\n", step, train_seconds, test_accuracy);
    nlohmann::json summary = {{"model", model_name},
                              {"steps", step},
                              {"final_loss", loss_value},
                              {"train_accuracy", acc},
                              {"test_accuracy", test_accuracy},
                              {"ms_per_step", step > 0 ? train_ms / static_cast<double>(step) : 0.0},
                              {"train_seconds", train_seconds},
                              {"threads", threads}};
    summary.update(dtr_json);
    std::printf("%s\n", summary.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_resnet: %s\n", e.what());
    return 1;
  }
  return 0;
}
