// Trains an Unrolled GAN (Metz et al., 2016) on the 8-Gaussian ring under a DTR budget: the
// generator's loss goes through --unroll differentiable steps of the discriminator's Adam, so
// every step differentiates twice through the unrolled chain.  --unroll 0 is the standard GAN.
// Usage: train_gan [--unroll 5] [--steps N] [--budget 0.5] [--plot samples.png]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/random.h"
#include "examples/common/dtr_flags.h"
#include "examples/common/gnuplot.h"
#include "examples/common/progress.h"
#include "models/gan.h"
#include "nn/nn.h"
#include "nn/serialize.h"
#include "remat.h"

using namespace remat;

namespace {

// splitmix64: one well-mixed seed per (run seed, step, stream).
std::uint64_t mix(std::uint64_t seed, std::uint64_t step, std::uint64_t stream) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + step * 0xBF58476D1CE4E5B9ull + stream + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Snapshot {
  long step;
  std::vector<float> xy;
};

// The samples of each snapshot side by side over the ring's modes, as one PNG.
std::string plot_script(const std::vector<Snapshot>& snaps, const std::string& data_path,
                        const std::string& png_path, int unroll) {
  std::string s = fmt::format("set terminal pngcairo size {},330 font ',9'\nset output {}\n",
                              300 * snaps.size(), examples::gnuplot_quoted(png_path));
  s += fmt::format(
      "set multiplot layout 1,{} title {}\n", snaps.size(),
      examples::gnuplot_quoted(fmt::format(
          "Unrolled GAN, {} unrolled steps: generated samples (blue), modes (red)", unroll)));
  s += "set size ratio -1\nset xrange [-2.6:2.6]\nset yrange [-2.6:2.6]\nunset key\n";
  s += "set xtics 1\nset ytics 1\n";
  for (std::size_t i = 0; i < snaps.size(); ++i) {
    s += fmt::format("set title 'step {}'\n", snaps[i].step);
    s += fmt::format(
        "plot {} index {} using 1:2 with dots lc rgb '#2060c0', {} index {} using 1:2 with points "
        "pt 7 ps 0.5 lc rgb '#d02020'\n",
        examples::gnuplot_quoted(data_path), 2 * i, examples::gnuplot_quoted(data_path), 2 * i + 1);
  }
  return s + "unset multiplot\n";
}

}  // namespace

int main(int argc, char** argv) {
  ensure_thread_policy(argc, argv);
  CLI::App app{"Train an Unrolled GAN on a ring of 8 Gaussians under a memory budget"};
  long steps = 25000;
  std::string schedule = "cosine";
  int unroll = 5;
  std::int64_t batch_size = 512, eval_samples = 2500;
  models::GanOptions net;
  models::UnrolledGanOptions train;
  double beta1 = 0.5;
  long eval_every = 1000;
  int snapshots = 4;
  std::uint64_t seed = 0;
  int threads = num_threads();
  std::string save_path, resume_path, plot_path;
  examples::DtrFlags dtr;
  using examples::whole_in_range;
  app.add_option("--steps", steps, "training steps (each updates both networks)")
      ->check(whole_in_range(1L, examples::kMaxSteps));
  app.add_option("--unroll", unroll,
                 "differentiable discriminator steps the generator's loss goes through (0: the "
                 "standard GAN)")
      ->check(whole_in_range(0, 1000));
  app.add_option("--batch-size", batch_size, "real points and noise vectors per step")
      ->check(whole_in_range<std::int64_t>(1, examples::kMaxCount));
  app.add_option("--lr-generator", train.generator_adam.lr, "the generator's Adam learning rate")
      ->check(examples::positive_real());
  app.add_option("--lr-discriminator", train.discriminator_adam.lr,
                 "the discriminator's Adam learning rate (also of the unrolled steps)")
      ->check(examples::positive_real());
  app.add_option("--beta1", beta1, "Adam's beta1 for both networks")
      ->check(examples::real_in_range(0, true, 1, "in [0, 1)"));
  app.add_option("--noise", net.noise_dim, "noise dimension")
      ->check(whole_in_range<std::int64_t>(1, 1 << 16));
  app.add_option("--hidden", net.generator_hidden, "hidden units of the generator's layers")
      ->check(whole_in_range<std::int64_t>(1, 1 << 16));
  app.add_option("--discriminator-hidden", net.discriminator_hidden,
                 "hidden units of the discriminator's layer")
      ->check(whole_in_range<std::int64_t>(1, 1 << 16));
  app.add_option("--schedule", schedule,
                 "both learning rates over the steps: cosine (annealed to 0) or constant")
      ->check(CLI::IsMember({"cosine", "constant"}));
  app.add_option("--eval-samples", eval_samples, "generated points each evaluation measures")
      ->check(whole_in_range<std::int64_t>(1, examples::kMaxCount));
  app.add_option("--eval-every", eval_every,
                 "modes covered and sample quality every N steps (0: at the end)")
      ->check(whole_in_range(0L, examples::kMaxSteps));
  app.add_option("--plot", plot_path,
                 "draw the samples at --snapshots points of training into this PNG (gnuplot)");
  app.add_option("--snapshots", snapshots, "how many points of training --plot shows")
      ->check(whole_in_range(1, 16));
  app.add_option("--seed", seed, "seed for initialisation, data and noise");
  app.add_option("--threads", threads, "CPU threads")->check(whole_in_range(1, max_threads()));
  app.add_option("--save", save_path,
                 "save both networks and optimizers here at the end (PATH, PATH.optim, "
                 "PATH.discriminator, PATH.discriminator.optim)");
  app.add_option("--resume", resume_path, "load what --save wrote from here first");
  dtr.add_to(app);
  CLI11_PARSE(app, argc, argv);
  if (beta1 >= 1) {
    std::fprintf(stderr, "train_gan: --beta1 must be below 1, got %g\n", beta1);
    return 2;
  }

  try {
    set_num_threads(threads);
    manual_seed(seed);
    const std::vector<std::string> suffixes{"", ".optim", ".discriminator", ".discriminator.optim"};
    if (!save_path.empty())
      for (const auto& s : suffixes) nn::check_save_path(save_path + s);
    if (!plot_path.empty()) nn::check_save_path(plot_path);
    train.unroll = unroll;
    train.generator_adam.betas.first = train.discriminator_adam.betas.first = beta1;
    models::UnrolledGan gan(net, train);
    if (!resume_path.empty()) {
      nn::load(gan.generator(), resume_path);
      nn::load(gan.generator_optimizer(), resume_path + ".optim");
      nn::load(gan.discriminator(), resume_path + ".discriminator");
      nn::load(gan.discriminator_optimizer(), resume_path + ".discriminator.optim");
    }
    // A resumed run continues the stream of batches where the saved one stopped (the steps the
    // optimizer has taken); the learning-rate schedule starts over the new --steps.
    const nn::ParamState* taken = gan.generator_optimizer().state(0, 0);
    const long first_step = taken ? static_cast<long>(taken->step) : 0;
    std::vector<std::unique_ptr<nn::LRScheduler>> schedulers;
    if (schedule == "cosine") {
      schedulers.push_back(
          std::make_unique<nn::CosineAnnealingLR>(gan.generator_optimizer(), steps));
      schedulers.push_back(
          std::make_unique<nn::CosineAnnealingLR>(gan.discriminator_optimizer(), steps));
    }
    Pool& pool = Pool::of(Device::cpu());
    dtr.configure(pool);
    examples::Progress progress(steps, 500);
    const std::uint64_t eval_seed = mix(seed, 0, 7);  // the same noise at every evaluation
    std::vector<Snapshot> snaps;
    auto snapshot_due = [&](long step) {
      if (plot_path.empty()) return false;
      if (snapshots == 1) return step == steps;
      for (int i = 0; i < snapshots; ++i)
        if (step == static_cast<long>(static_cast<double>(steps) * i / (snapshots - 1)))
          return true;
      return false;
    };
    auto evaluate = [&](long step, const Tensor& samples, nlohmann::json& curve, double seconds) {
      const auto q = models::sample_quality(samples);
      curve.push_back({{"step", step},
                       {"seconds", seconds},
                       {"modes_covered", q.modes_covered},
                       {"high_quality_fraction", q.high_quality_fraction}});
      std::printf("step %ld: %d of 8 modes covered, %.1f%% high-quality samples after %.1f s\n",
                  step, q.modes_covered, 100 * q.high_quality_fraction, seconds);
      return q;
    };
    nlohmann::json curve = nlohmann::json::array();
    models::GanStepLosses losses;
    double train_ms = 0;
    if (snapshot_due(0))
      snaps.push_back({0, gan.sample(eval_samples, eval_seed).to_vector<float>()});
    for (long step = 1; step <= steps; ++step) {
      const auto at = static_cast<std::uint64_t>(first_step + step);
      const Tensor real = models::sample_ring(batch_size, mix(seed, at, 0));
      const Tensor noise = randn({batch_size, net.noise_dim}, {.seed = mix(seed, at, 1)});
      const auto t0 = std::chrono::steady_clock::now();
      losses = gan.step(real, noise);
      for (auto& s : schedulers) s->step();
      dtr.after_step(pool);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      train_ms += ms;
      progress.update_text(
          step, fmt::format("generator loss {:.4f}  discriminator loss {:.4f}  {:.1f} ms/step  "
                            "resident {:.1f} MiB",
                            losses.generator_loss, losses.discriminator_loss, ms,
                            pool.resident_bytes() / 1048576.0));
      const bool eval_now = eval_every > 0 && step % eval_every == 0 && step != steps;
      if (eval_now || snapshot_due(step)) {
        const Tensor samples = gan.sample(eval_samples, eval_seed);
        if (eval_now) evaluate(step, samples, curve, train_ms / 1e3);
        if (snapshot_due(step)) snaps.push_back({step, samples.to_vector<float>()});
      }
    }
    progress.finish();
    dtr.end_training(pool);
    const nlohmann::json dtr_json = examples::dtr_summary(pool, dtr);
    const auto q = evaluate(steps, gan.sample(eval_samples, eval_seed), curve, train_ms / 1e3);
    if (!save_path.empty()) {
      nn::save(gan.generator(), save_path);
      nn::save(gan.generator_optimizer(), save_path + ".optim");
      nn::save(gan.discriminator(), save_path + ".discriminator");
      nn::save(gan.discriminator_optimizer(), save_path + ".discriminator.optim");
    }
    if (!plot_path.empty()) {
      const std::string data_path = plot_path + ".dat";
      std::ofstream data(data_path);
      for (const Snapshot& s : snaps) {
        for (std::size_t i = 0; i + 1 < s.xy.size(); i += 2)
          data << s.xy[i] << ' ' << s.xy[i + 1] << '\n';
        data << "\n\n";
        for (const auto& m : models::ring_modes()) data << m[0] << ' ' << m[1] << '\n';
        data << "\n\n";
      }
      data.close();
      std::string error;
      if (!examples::run_gnuplot(plot_script(snaps, data_path, plot_path, unroll), &error))
        std::fprintf(stderr, "train_gan: no plot: %s\n", error.c_str());
    }
    nlohmann::json summary = {{"model", "gan"},
                              {"unroll", unroll},
                              {"steps", steps},
                              {"final_loss", losses.generator_loss},
                              {"final_discriminator_loss", losses.discriminator_loss},
                              {"modes_covered", q.modes_covered},
                              {"high_quality_fraction", q.high_quality_fraction},
                              {"high_quality_per_mode", q.high_quality_per_mode},
                              {"ms_per_step", train_ms / static_cast<double>(steps)},
                              {"batch_size", batch_size},
                              {"schedule", schedule},
                              {"threads", threads},
                              {"curve", curve}};
    summary.update(dtr_json);
    std::printf("%s\n", summary.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_gan: %s\n", e.what());
    return 1;
  }
  return 0;
}
