// The Unrolled GAN of Metz et al. (2016) on the 8-Gaussian ring (their section 3.1): an MLP
// generator and discriminator, and a generator loss taken through K differentiable steps of the
// discriminator's Adam, so the generator's gradient carries second derivatives through the whole
// unrolled chain (all of it in the DTR cache like any other tensors).  K = 0 is the standard GAN.
// Usage:
//   models::UnrolledGan gan({}, {.unroll = 5});
//   for (step...) gan.step(models::sample_ring(512, seed), randn({512, 256}));
//   models::SampleQuality q = models::sample_quality(gan.sample(2500, eval_seed));
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/functional_optim.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/sequential.h"

namespace remat::models {

// ---------------------------------------------------------------- the data

struct RingOptions {
  int modes = 8;
  double radius = 2.0;
  double stddev = 0.02;
};

// The mixture's means, mode k at angle 2 pi k / modes.
std::vector<std::array<double, 2>> ring_modes(const RingOptions& ring = {});
// n points of the mixture (uniform over modes), [n, 2]; the same seed gives the same points.
Tensor sample_ring(std::int64_t n, std::uint64_t seed, const RingOptions& ring = {},
                   DType dtype = DType::Float32);

// How well samples cover the ring: a sample is high quality when it lies within
// `within_stddevs` standard deviations of its nearest mode; a mode is covered when at least
// `min_per_mode` high-quality samples have it nearest.
struct SampleQuality {
  int modes_covered = 0;
  double high_quality_fraction = 0;
  std::vector<std::int64_t> high_quality_per_mode;
};
SampleQuality sample_quality(const Tensor& samples, const RingOptions& ring = {},
                             double within_stddevs = 3.0, std::int64_t min_per_mode = 20);

// ---------------------------------------------------------------- the networks

// Metz et al.'s appendix: generator noise 256 -> 2 hidden ReLU layers of 128 -> 2 (linear);
// discriminator input scaled by 1/4 -> 1 hidden ReLU layer of 128 -> 1 logit; every weight
// orthogonal with gain 0.8, biases zero.
struct GanOptions {
  std::int64_t noise_dim = 256;
  std::int64_t generator_hidden = 128;
  std::int64_t generator_layers = 2;
  std::int64_t discriminator_hidden = 128;
  std::int64_t discriminator_layers = 1;
  double discriminator_input_scale = 0.25;
  double init_gain = 0.8;
  DType dtype = DType::Float32;
};

// An MLP: `layers` hidden ReLU layers of `hidden` units, then a linear output; input scaled.
class GanMlp : public nn::Module {
 public:
  GanMlp(std::string type_name, std::int64_t in, std::int64_t hidden, std::int64_t layers,
         std::int64_t out, double input_scale, double init_gain, DType dtype);
  Tensor forward(const Tensor& x) override;

 private:
  double input_scale_;
  std::shared_ptr<nn::Sequential> net_;
};

// The discriminator's loss (what it minimises; the generator maximises it):
// mean softplus(-D(real)) + mean softplus(D(fake)), i.e. -log D(real) - log(1 - D(fake)).
Tensor discriminator_loss(nn::Module& discriminator, const Tensor& real, const Tensor& fake);

// The generator's loss after `unroll` steps of Adam on the discriminator, each a functional
// update from the gradient at the previous step taken with create_graph: -discriminator_loss at
// the unrolled parameters.  `state` is where the discriminator's optimizer is (AdamState::of).
// Returns the loss and, as `first_gradient`, the discriminator's gradient at its own parameters
// (the first unrolled step's, detached): what its own update uses.
struct UnrolledLoss {
  Tensor generator_loss;
  Tensor discriminator_loss;  // at the discriminator's own parameters
  std::vector<Tensor> first_gradient;
};
UnrolledLoss unrolled_generator_loss(nn::Module& discriminator, nn::AdamState state,
                                     const nn::AdamOptions& adam, int unroll, const Tensor& real,
                                     const Tensor& fake);

// ---------------------------------------------------------------- training

struct UnrolledGanOptions {
  int unroll = 5;
  nn::AdamOptions generator_adam{.lr = 1e-3, .betas = {0.5, 0.999}};
  nn::AdamOptions discriminator_adam{.lr = 1e-4, .betas = {0.5, 0.999}};
};

struct GanStepLosses {
  double discriminator_loss = 0;
  double generator_loss = 0;
};

// Both networks and both optimizers.  One step updates both from one batch (as Metz et al.'s
// reference code): the discriminator by its gradient at its own parameters, the generator by
// the gradient of the unrolled loss.
class UnrolledGan {
 public:
  explicit UnrolledGan(const GanOptions& options = {}, const UnrolledGanOptions& training = {});
  GanStepLosses step(const Tensor& real, const Tensor& noise);
  // n generated points from noise drawn from `seed`, without autograd, in chunks of 512 rows.
  Tensor sample(std::int64_t n, std::uint64_t seed);

  GanMlp& generator() { return *generator_; }
  GanMlp& discriminator() { return *discriminator_; }
  nn::Adam& generator_optimizer() { return *generator_opt_; }
  nn::Adam& discriminator_optimizer() { return *discriminator_opt_; }
  const GanOptions& options() const { return options_; }
  const UnrolledGanOptions& training() const { return training_; }

 private:
  GanOptions options_;
  UnrolledGanOptions training_;
  std::shared_ptr<GanMlp> generator_, discriminator_;
  std::unique_ptr<nn::Adam> generator_opt_, discriminator_opt_;
};

}  // namespace remat::models
