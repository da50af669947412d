#include "models/gan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/join.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace remat::models {

std::vector<std::array<double, 2>> ring_modes(const RingOptions& ring) {
  REMAT_CHECK(ring.modes > 0, "ring_modes: modes must be positive, got {}", ring.modes);
  std::vector<std::array<double, 2>> out;
  for (int k = 0; k < ring.modes; ++k) {
    const double a = 2 * std::numbers::pi * k / ring.modes;
    out.push_back({ring.radius * std::cos(a), ring.radius * std::sin(a)});
  }
  return out;
}

Tensor sample_ring(std::int64_t n, std::uint64_t seed, const RingOptions& ring, DType dtype) {
  REMAT_CHECK(n > 0, "sample_ring: the number of points must be positive, got {}", n);
  REMAT_CHECK(ring.stddev >= 0, "sample_ring: stddev must be non-negative, got {}", ring.stddev);
  const auto modes = ring_modes(ring);
  // Two keys from one seed: which mode, and the offset from it.
  const std::vector<std::int64_t> which =
      randint(0, ring.modes, {n}, {.dtype = DType::Int64, .seed = seed}).to_vector<std::int64_t>();
  const std::vector<double> offset =
      normal({n, 2}, 0.0, ring.stddev, {.dtype = DType::Float64, .seed = seed ^ 0x5bd1e995u})
          .to_vector<double>();
  std::vector<double> points(static_cast<std::size_t>(2 * n));
  for (std::size_t i = 0; i < which.size(); ++i)
    for (std::size_t d = 0; d < 2; ++d)
      points[2 * i + d] = modes[static_cast<std::size_t>(which[i])][d] + offset[2 * i + d];
  return to_dtype(tensor(points, Shape{n, 2}), dtype);
}

SampleQuality sample_quality(const Tensor& samples, const RingOptions& ring, double within_stddevs,
                             std::int64_t min_per_mode) {
  REMAT_CHECK(samples.defined() && samples.dim() == 2 && samples.size(1) == 2,
              "sample_quality: expected samples of shape [n, 2], got {}",
              samples.defined() ? fmt::format("{}", samples.shape()) : "an undefined tensor");
  const auto modes = ring_modes(ring);
  const std::vector<double> xy = to_dtype(detach(samples), DType::Float64).to_vector<double>();
  const double limit = within_stddevs * ring.stddev;
  SampleQuality q;
  q.high_quality_per_mode.assign(modes.size(), 0);
  const std::size_t n = xy.size() / 2;
  std::size_t good = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double best = std::numeric_limits<double>::infinity();
    std::size_t nearest = 0;
    for (std::size_t k = 0; k < modes.size(); ++k) {
      const double d = std::hypot(xy[2 * i] - modes[k][0], xy[2 * i + 1] - modes[k][1]);
      if (d < best) best = d, nearest = k;
    }
    if (best <= limit) ++good, ++q.high_quality_per_mode[nearest];
  }
  for (std::int64_t c : q.high_quality_per_mode) q.modes_covered += c >= min_per_mode ? 1 : 0;
  q.high_quality_fraction = n ? static_cast<double>(good) / static_cast<double>(n) : 0.0;
  return q;
}

GanMlp::GanMlp(std::string type_name, std::int64_t in, std::int64_t hidden, std::int64_t layers,
               std::int64_t out, double input_scale, double init_gain, DType dtype)
    : Module(std::move(type_name)), input_scale_(input_scale) {
  REMAT_CHECK(in > 0 && hidden > 0 && out > 0 && layers >= 0,
              "{}: sizes must be positive and layers non-negative, got in {}, hidden {}, "
              "layers {}, out {}",
              this->type_name(), in, hidden, layers, out);
  net_ = register_module("net", std::make_shared<nn::Sequential>());
  std::int64_t width = in;
  for (std::int64_t l = 0; l <= layers; ++l) {
    const std::int64_t next = l < layers ? hidden : out;
    auto linear = net_->push_back(std::make_shared<nn::Linear>(
        nn::LinearOptions{.in_features = width, .out_features = next, .dtype = dtype}));
    nn::init::orthogonal_(linear->param("weight"), init_gain);
    nn::init::zeros_(linear->param("bias"));
    if (l < layers) net_->push_back(std::make_shared<nn::ReLU>());
    width = next;
  }
}

Tensor GanMlp::forward(const Tensor& x) {
  return net_->forward(input_scale_ == 1.0 ? x : mul(x, input_scale_));
}

Tensor discriminator_loss(nn::Module& discriminator, const Tensor& real, const Tensor& fake) {
  return add(mean(softplus(neg(discriminator.forward(real)))),
             mean(softplus(discriminator.forward(fake))));
}

UnrolledLoss unrolled_generator_loss(nn::Module& discriminator, nn::AdamState state,
                                     const nn::AdamOptions& adam, int unroll, const Tensor& real,
                                     const Tensor& fake) {
  REMAT_CHECK(unroll >= 0, "unrolled_generator_loss: unroll must be non-negative, got {}", unroll);
  std::vector<std::string> names;
  std::vector<Tensor> params;
  for (auto& [name, p] : discriminator.named_parameters()) {
    names.push_back(name);
    params.push_back(p);
  }
  auto loss_at = [&](const std::vector<Tensor>& at) {
    std::map<std::string, Tensor> subs;
    for (std::size_t i = 0; i < names.size(); ++i) subs.emplace(names[i], at[i]);
    return nn::functional_call(
        discriminator, subs,
        [&](const Tensor& r, const Tensor& f) { return discriminator_loss(discriminator, r, f); },
        real, fake);
  };
  UnrolledLoss out;
  out.discriminator_loss = discriminator_loss(discriminator, real, fake);
  Tensor loss = out.discriminator_loss;
  std::vector<Tensor> at = params;
  for (int k = 0; k < unroll; ++k) {
    // Each step's gradient keeps its graph: the generator differentiates through it.
    std::vector<Tensor> g = grad({loss}, at, {}, /*retain_graph=*/true, /*create_graph=*/true);
    if (k == 0)
      for (const Tensor& t : g) out.first_gradient.push_back(detach(t));
    at = nn::adam_step(at, g, state, adam);
    loss = loss_at(at);
  }
  if (unroll == 0) {
    for (const Tensor& t : grad({loss}, params, {}, /*retain_graph=*/true))
      out.first_gradient.push_back(t);
  }
  out.generator_loss = neg(loss);
  return out;
}

UnrolledGan::UnrolledGan(const GanOptions& o, const UnrolledGanOptions& training)
    : options_(o), training_(training) {
  REMAT_CHECK(training.unroll >= 0, "UnrolledGan: unroll must be non-negative, got {}",
              training.unroll);
  generator_ = std::make_shared<GanMlp>("Generator", o.noise_dim, o.generator_hidden,
                                        o.generator_layers, 2, 1.0, o.init_gain, o.dtype);
  discriminator_ =
      std::make_shared<GanMlp>("Discriminator", 2, o.discriminator_hidden, o.discriminator_layers,
                               1, o.discriminator_input_scale, o.init_gain, o.dtype);
  generator_opt_ = std::make_unique<nn::Adam>(generator_->parameters(), training.generator_adam);
  discriminator_opt_ =
      std::make_unique<nn::Adam>(discriminator_->parameters(), training.discriminator_adam);
}

GanStepLosses UnrolledGan::step(const Tensor& real, const Tensor& noise) {
  REMAT_CHECK(real.defined() && real.dim() == 2 && real.size(1) == 2,
              "UnrolledGan::step: expected real points of shape [n, 2], got {}",
              real.defined() ? fmt::format("{}", real.shape()) : "an undefined tensor");
  REMAT_CHECK(noise.defined() && noise.dim() == 2 && noise.size(1) == options_.noise_dim,
              "UnrolledGan::step: expected noise of shape [n, {}], got {}", options_.noise_dim,
              noise.defined() ? fmt::format("{}", noise.shape()) : "an undefined tensor");
  GanStepLosses losses;
  {
    const Tensor fake = generator_->forward(noise);
    UnrolledLoss u =
        unrolled_generator_loss(*discriminator_, nn::AdamState::of(*discriminator_opt_),
                                training_.discriminator_adam, training_.unroll, real, fake);
    const std::vector<Tensor> g_params = generator_->parameters();
    std::vector<Tensor> g_grads = grad({u.generator_loss}, g_params);
    for (std::size_t i = 0; i < g_params.size(); ++i) g_params[i].set_grad(g_grads[i]);
    const std::vector<Tensor> d_params = discriminator_->parameters();
    for (std::size_t i = 0; i < d_params.size(); ++i) d_params[i].set_grad(u.first_gradient[i]);
    losses = {u.discriminator_loss.item<double>(), u.generator_loss.item<double>()};
  }
  generator_opt_->step();
  discriminator_opt_->step();
  generator_opt_->zero_grad();
  discriminator_opt_->zero_grad();
  return losses;
}

Tensor UnrolledGan::sample(std::int64_t n, std::uint64_t seed) {
  REMAT_CHECK(n > 0, "UnrolledGan::sample: n must be positive, got {}", n);
  NoGradGuard no_grad;
  // In chunks of 512 rows, each from its own key: memory like one training batch's, so a
  // budget that fits training fits sampling.
  constexpr std::int64_t kChunk = 512;
  std::vector<Tensor> parts;
  for (std::int64_t start = 0, k = 0; start < n; start += kChunk, ++k) {
    const std::int64_t rows = std::min(kChunk, n - start);
    const std::uint64_t key = seed ^ (static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ull);
    parts.push_back(generator_->forward(
        randn({rows, options_.noise_dim}, {.dtype = options_.dtype, .seed = key})));
  }
  return parts.size() == 1 ? parts[0] : cat(parts, 0);
}

}  // namespace remat::models
