// Trains a character-level language model (LSTM or causal Transformer, models/lm.h) on the
// fortunes corpus (Debian package `fortunes`) under a DTR budget, and reports validation bits per
// character.
// Usage: train_lm --model lstm|transformer [--steps 2000] [--minutes 5] [--budget 0.5]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/random.h"
#include "examples/common/dtr_flags.h"
#include "examples/common/progress.h"
#include "examples/common/run_flags.h"
#include "models/lm.h"
#include "nn/clip_grad.h"
#include "nn/lr_scheduler.h"
#include "nn/nn.h"
#include "nn/serialize.h"
#include "nn/text.h"
#include "ops/loss.h"
#include "remat.h"

using namespace remat;

namespace {

// Mean cross entropy over every target of the batches, in bits (validation bits per character).
double bits_per_character(nn::Module& model, const std::vector<nn::SequenceBatch>& batches) {
  NoGradGuard no_grad;
  model.eval();
  double nats = 0, count = 0;
  for (const auto& b : batches) {
    const double n = static_cast<double>(b.targets.numel());
    nats += models::language_model_loss(model.forward(b.inputs), b.targets).item<double>() * n;
    count += n;
  }
  model.train();
  return count > 0 ? nats / count / std::log(2.0) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  ensure_thread_policy(argc, argv);
  CLI::App app{"Train a character-level LSTM or Transformer language model on fortunes"};
  std::string model_name = "lstm";
  long steps = 2000;
  double minutes = 0;
  std::int64_t batch_size = 32, length = 128;
  std::int64_t embedding = 64, hidden = 256, layers = 0;
  std::int64_t d_model = 128, heads = 4, feedforward = 512;
  double dropout = 0, lr = 2e-3, clip = 1.0;
  long warmup = 100, eval_every = 250;
  std::int64_t valid_batches = 0;
  std::string data_dir = nn::kFortunesDir;
  examples::DtrFlags dtr;
  examples::RunFlags run;
  using examples::whole_in_range;
  app.add_option("--model", model_name, "lstm or transformer")
      ->check(CLI::IsMember({"lstm", "transformer"}));
  app.add_option("--steps", steps, "training steps (batches)")
      ->check(whole_in_range(1L, examples::kMaxSteps));
  app.add_option("--minutes", minutes,
                 "stop once training (not evaluation) has taken this long (0: no limit)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--batch-size", batch_size, "sequences per step")
      ->check(whole_in_range<std::int64_t>(1, examples::kMaxCount));
  app.add_option("--length", length, "characters per sequence")
      ->check(whole_in_range<std::int64_t>(1, 1 << 16));
  app.add_option("--embedding", embedding, "LSTM: character embedding size")
      ->check(whole_in_range<std::int64_t>(1, 1 << 16));
  app.add_option("--hidden", hidden, "LSTM: state size")
      ->check(whole_in_range<std::int64_t>(1, 1 << 16));
  app.add_option("--layers", layers, "LSTM or encoder layers (0: 1 for lstm, 4 for transformer)")
      ->check(whole_in_range<std::int64_t>(0, 1024));
  app.add_option("--d-model", d_model, "Transformer: model width")
      ->check(whole_in_range<std::int64_t>(1, 1 << 16));
  app.add_option("--heads", heads, "Transformer: attention heads (must divide --d-model)")
      ->check(whole_in_range<std::int64_t>(1, 1 << 16));
  app.add_option("--ffn", feedforward, "Transformer: feed-forward width")
      ->check(whole_in_range<std::int64_t>(1, 1 << 20));
  app.add_option("--dropout", dropout, "dropout in training")->check(CLI::Range(0.0, 0.99));
  app.add_option("--lr", lr, "Adam's learning rate")->check(examples::positive_real());
  app.add_option("--warmup", warmup, "steps of linear learning-rate warm-up from lr/100")
      ->check(whole_in_range(0L, examples::kMaxSteps));
  app.add_option("--clip", clip, "clip the gradient norm to this (0: no clipping)")
      ->check(CLI::Range(0.0, 1e30));
  app.add_option("--eval-every", eval_every,
                 "validation bits per character every N steps (0: "
                 "only at the end)")
      ->check(whole_in_range(0L, examples::kMaxSteps));
  app.add_option("--valid-batches", valid_batches,
                 "evaluate on the first N validation batches only (0: the whole split)")
      ->check(whole_in_range<std::int64_t>(0, examples::kMaxCount));
  app.add_option("--data-dir", data_dir, "folder of the fortunes text files");
  run.add_to(app);
  dtr.add_to(app);
  CLI11_PARSE(app, argc, argv);

  try {
    run.begin();
    const nn::TextCorpus corpus = nn::load_fortunes(data_dir);
    nn::SequenceLoader loader(corpus.train,
                              {.batch_size = batch_size, .length = length, .seed = run.seed});
    const auto valid = nn::contiguous_batches(
        corpus.valid, batch_size, length,
        valid_batches > 0 ? std::optional<std::int64_t>(valid_batches) : std::nullopt);

    if (layers == 0) layers = model_name == "lstm" ? 1 : 4;
    std::shared_ptr<nn::Module> model;
    if (model_name == "lstm")
      model = std::make_shared<models::LstmLm>(models::LstmLmOptions{
          .embedding_dim = embedding, .hidden = hidden, .layers = layers, .dropout = dropout});
    else
      model = std::make_shared<models::TransformerLm>(
          models::TransformerLmOptions{.d_model = d_model,
                                       .heads = heads,
                                       .feedforward = feedforward,
                                       .layers = layers,
                                       .max_length = length,
                                       .dropout = dropout});
    std::int64_t parameter_count = 0;
    for (const auto& p : model->parameters()) parameter_count += p.numel();
    nn::Adam optimizer(model->parameters(), {.lr = lr});
    run.resume(*model, optimizer);
    std::unique_ptr<nn::LinearLR> scheduler;
    if (warmup > 0) scheduler = std::make_unique<nn::LinearLR>(optimizer, 0.01, 1.0, warmup);

    Pool& pool = Pool::of(Device::cpu());
    dtr.configure(pool);
    examples::Progress progress(steps);
    std::printf("%s LM: %lld parameters; corpus %zu train, %zu validation characters\n",
                model_name.c_str(), static_cast<long long>(parameter_count), corpus.train.size(),
                corpus.valid.size());
    double loss_value = 0, train_ms = 0;
    long done = 0;
    nlohmann::json curve = nlohmann::json::array();
    auto evaluate = [&](long step) {
      const double bpc = bits_per_character(*model, valid);
      curve.push_back({{"step", step}, {"seconds", train_ms / 1e3}, {"valid_bpc", bpc}});
      std::printf("step %ld: validation %.4f bits per character after %.1f s of training\n", step,
                  bpc, train_ms / 1e3);
      return bpc;
    };
    double valid_bpc = 0;
    for (long step = 1; step <= steps; ++step) {
      const nn::SequenceBatch batch = loader.next();
      const auto t0 = std::chrono::steady_clock::now();
      {
        optimizer.zero_grad();  // before the forward: the old gradients take no memory there
        const Tensor loss =
            models::language_model_loss(model->forward(batch.inputs), batch.targets);
        backward(loss);
        loss_value = loss.item<double>();
      }
      if (clip > 0) nn::clip_grad_norm_(model->parameters(), clip);
      optimizer.step();
      if (scheduler) scheduler->step();
      dtr.after_step(pool);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      train_ms += ms;
      done = step;
      progress.update_text(
          step, fmt::format("loss {:.4f}  {:.2f} bpc  {:.0f} char/s  resident {:.1f} MiB",
                            loss_value, loss_value / std::log(2.0),
                            static_cast<double>(batch_size * length) * 1e3 / ms,
                            pool.resident_bytes() / 1048576.0));
      const bool out_of_time = minutes > 0 && train_ms >= minutes * 60e3;
      if (out_of_time || step == steps) break;
      if (eval_every > 0 && step % eval_every == 0) valid_bpc = evaluate(step);
    }
    progress.finish();
    dtr.end_training(pool);
    valid_bpc = evaluate(done);
    const nlohmann::json dtr_json = examples::dtr_summary(pool, dtr);
    run.save(*model, optimizer);
    nlohmann::json summary = {{"model", model_name + "_lm"},
                              {"steps", done},
                              {"final_loss", loss_value},
                              {"valid_bpc", valid_bpc},
                              {"ms_per_step", train_ms / static_cast<double>(done)},
                              {"train_seconds", train_ms / 1e3},
                              {"parameters", parameter_count},
                              {"batch_size", batch_size},
                              {"length", length},
                              {"lr", lr},
                              {"threads", run.threads},
                              {"valid_curve", curve}};
    summary.update(dtr_json);
    std::printf("%s\n", summary.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_lm: %s\n", e.what());
    return 1;
  }
  return 0;
}
