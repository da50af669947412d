// Trains a Child-Sum TreeLSTM on ListOps (generated, seeded: nn/listops.h) under a DTR budget.
// Every batch is a different set of trees, so every step builds a different graph.
// Usage: train_treelstm [--steps 12000] [--batch-size 128] [--group 8] [--budget 0.3]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/random.h"
#include "examples/common/dtr_flags.h"
#include "examples/common/progress.h"
#include "examples/common/run_flags.h"
#include "models/treelstm.h"
#include "nn/listops.h"
#include "nn/nn.h"
#include "nn/serialize.h"
#include "ops/loss.h"
#include "remat.h"

using namespace remat;

namespace {

// Fraction of `examples` the model labels right, in batches, without autograd.
double accuracy(models::TreeLSTM& model, const std::vector<listops::Example>& examples,
                std::size_t batch) {
  NoGradGuard no_grad;
  std::size_t correct = 0;
  for (std::size_t b = 0; b < examples.size(); b += batch) {
    const std::size_t e = std::min(examples.size(), b + batch);
    std::vector<listops::Tree> trees;
    std::vector<std::int64_t> labels;
    for (std::size_t i = b; i < e; ++i) {
      trees.push_back(examples[i].tree);
      labels.push_back(examples[i].label);
    }
    const Tensor pred = argmax(model.logits(trees), 1);
    correct += static_cast<std::size_t>(
        sum(to_dtype(eq(pred, tensor(labels)), DType::Float64)).item<double>());
  }
  return examples.empty() ? 0.0
                          : static_cast<double>(correct) / static_cast<double>(examples.size());
}

}  // namespace

int main(int argc, char** argv) {
  ensure_thread_policy(argc, argv);
  CLI::App app{"Train a TreeLSTM on generated ListOps expressions under a memory budget"};
  long steps = 12000;
  std::int64_t batch_size = 128, hidden = 128, embedding = 64;
  std::int64_t train_size = 300000, valid_size = 1000, test_size = 2000;
  double lr = 2e-3;
  long eval_every = 500;
  std::int64_t group = 8;
  std::string schedule = "cosine";
  listops::GeneratorOptions data;
  examples::DtrFlags dtr;
  examples::RunFlags run;
  using examples::whole_in_range;
  app.add_option("--steps", steps, "training steps (batches)")
      ->check(whole_in_range(1L, examples::kMaxSteps));
  app.add_option("--batch-size", batch_size, "expressions per step")
      ->check(whole_in_range<std::int64_t>(1, examples::kMaxCount));
  app.add_option("--lr", lr, "Adam's learning rate")->check(examples::positive_real());
  app.add_option("--hidden", hidden, "TreeLSTM state size")
      ->check(whole_in_range<std::int64_t>(1, 1 << 16));
  app.add_option("--embedding", embedding, "token embedding size")
      ->check(whole_in_range<std::int64_t>(1, 1 << 16));
  app.add_option("--train-size", train_size, "training expressions (reshuffled every epoch)")
      ->check(whole_in_range<std::int64_t>(1, std::int64_t{1} << 30));
  app.add_option("--valid-size", valid_size, "validation expressions (the accuracy curve)")
      ->check(whole_in_range<std::int64_t>(0, examples::kMaxCount));
  app.add_option("--test-size", test_size, "held-out test expressions")
      ->check(whole_in_range<std::int64_t>(0, examples::kMaxCount));
  app.add_option("--max-depth", data.max_depth, "deepest nesting of lists")
      ->check(whole_in_range(1, 64));
  app.add_option("--max-args", data.max_args, "most arguments of one list")
      ->check(whole_in_range(2, 64));
  app.add_option("--max-length", data.max_length, "most tokens of one expression")
      ->check(whole_in_range(3, 1 << 20));
  app.add_option("--group", group,
                 "trees per level-batched forward; a step sums the losses of its groups (0: the "
                 "whole batch at once). Smaller groups mean smaller ops, so tighter budgets fit")
      ->check(whole_in_range<std::int64_t>(0, examples::kMaxCount));
  app.add_option("--schedule", schedule,
                 "learning rate over the steps: cosine (annealed to 0) or constant")
      ->check(CLI::IsMember({"cosine", "constant"}));
  app.add_option("--eval-every", eval_every, "validation accuracy every N steps (0: never)")
      ->check(whole_in_range(0L, examples::kMaxSteps));
  run.add_to(app);
  dtr.add_to(app);
  CLI11_PARSE(app, argc, argv);

  try {
    run.begin();
    const auto train =
        listops::make_split(listops::Split::Train, static_cast<std::size_t>(train_size), data);
    const auto valid =
        listops::make_split(listops::Split::Validation, static_cast<std::size_t>(valid_size), data);
    const auto test =
        listops::make_split(listops::Split::Test, static_cast<std::size_t>(test_size), data);

    models::TreeLSTM model({.embedding_dim = embedding, .hidden = hidden});
    nn::Adam optimizer(model.parameters(), {.lr = lr});
    run.resume(model, optimizer);

    std::unique_ptr<nn::LRScheduler> scheduler;
    if (schedule == "cosine") scheduler = std::make_unique<nn::CosineAnnealingLR>(optimizer, steps);
    Pool& pool = Pool::of(Device::cpu());
    dtr.configure(pool);
    examples::Progress progress(steps);
    // Evaluation runs in groups too, so its ops fit the budget training fits.
    const std::size_t eval_batch = group > 0 ? static_cast<std::size_t>(group) : 256;
    // Data order: a seeded permutation of the training set per epoch.
    std::vector<std::size_t> order(train.size());
    listops::Rng shuffle(run.seed * 0x9E3779B97F4A7C15ull + 1);
    std::size_t next = order.size();
    std::size_t max_nodes = 0;
    double loss_value = 0, acc = 0, train_ms = 0;
    nlohmann::json curve = nlohmann::json::array();
    for (long step = 1; step <= steps; ++step) {
      std::vector<listops::Tree> trees;
      std::vector<std::int64_t> labels;
      for (std::int64_t i = 0; i < batch_size; ++i) {
        if (next == order.size()) {
          for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
          for (std::size_t k = order.size(); k > 1; --k)
            std::swap(order[k - 1], order[shuffle.below(static_cast<int>(k))]);
          next = 0;
        }
        const auto& ex = train[order[next++]];
        trees.push_back(ex.tree);
        labels.push_back(ex.label);
        max_nodes = std::max(max_nodes, ex.tree.token.size());
      }
      const auto t0 = std::chrono::steady_clock::now();
      {
        // The mean loss over the batch, as a sum over groups of trees: the same gradient as one
        // forward over the whole batch, with every op a group's size.
        const std::size_t per = group > 0 ? static_cast<std::size_t>(group) : trees.size();
        Tensor loss, correct;
        for (std::size_t b = 0; b < trees.size(); b += per) {
          const std::size_t e = std::min(trees.size(), b + per);
          const Tensor logits = model.logits(std::span(trees).subspan(b, e - b));
          const Tensor target =
              tensor(std::vector<std::int64_t>(labels.begin() + b, labels.begin() + e));
          const Tensor part = mul(cross_entropy(logits, target, {.reduction = Reduction::Sum}),
                                  1.0 / static_cast<double>(trees.size()));
          const Tensor hits = sum(to_dtype(eq(argmax(logits, 1), target), DType::Float64));
          loss = loss.defined() ? add(loss, part) : part;
          correct = correct.defined() ? add(correct, hits) : hits;
        }
        optimizer.zero_grad();
        backward(loss);
        loss_value = loss.item<double>();
        acc = correct.item<double>() / static_cast<double>(trees.size());
      }
      optimizer.step();
      if (scheduler) scheduler->step();
      dtr.after_step(pool);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      train_ms += ms;
      progress.update(step, loss_value, acc, static_cast<double>(batch_size) * 1e3 / ms,
                      pool.resident_bytes());
      if (eval_every > 0 && (step % eval_every == 0 || step == steps) && !valid.empty()) {
        const double v = accuracy(model, valid, eval_batch);
        curve.push_back({{"step", step}, {"seconds", train_ms / 1e3}, {"valid_accuracy", v}});
        std::printf("step %ld: validation accuracy %.4f after %.1f s of training\n", step, v,
                    train_ms / 1e3);
      }
    }
    progress.finish();
    dtr.end_training(pool);
    const nlohmann::json dtr_json = examples::dtr_summary(pool, dtr);
    const double test_accuracy = accuracy(model, test, eval_batch);
    run.save(model, optimizer);
    nlohmann::json summary = {{"model", "treelstm"},
                              {"steps", steps},
                              {"final_loss", loss_value},
                              {"train_accuracy", acc},
                              {"test_accuracy", test_accuracy},
                              {"ms_per_step", train_ms / static_cast<double>(steps)},
                              {"max_nodes", max_nodes},
                              {"batch_size", batch_size},
                              {"group", group},
                              {"lr", lr},
                              {"schedule", schedule},
                              {"threads", run.threads},
                              {"valid_curve", curve}};
    summary.update(dtr_json);
    std::printf("%s\n", summary.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_treelstm: %s\n", e.what());
    return 1;
  }
  return 0;
}
