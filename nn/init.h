// Parameter initialisation as torch.nn.init: each function draws new values from the
// counter-based generator (the default one, set by manual_seed, unless a seed is given) and
// writes them into the tensor in place.  Usage: manual_seed(0); init::kaiming_uniform_(w, {.a =
// 0}); init::xavier_normal_(w, init::calculate_gain(init::Nonlinearity::Tanh));  init::zeros_(b);
#pragma once
#include <cstdint>
#include <optional>
#include <utility>

#include "core/tensor.h"

namespace remat::nn::init {

enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };
enum class FanMode { FanIn, FanOut };

// The recommended gain for a nonlinearity, as torch.nn.init.calculate_gain: 1 for Linear, Conv
// and Sigmoid, 5/3 for Tanh, sqrt(2) for ReLU, sqrt(2 / (1 + slope^2)) for LeakyReLU (param is
// the negative slope, 0.01 when absent), 3/4 for SELU.
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);

// (fan_in, fan_out) = (size(1), size(0)) times the product of the dims after the first two;
// the tensor needs at least two dims.
std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

struct KaimingOptions {
  double a = 0;  // the negative slope of the rectifier that follows (LeakyReLU)
  FanMode mode = FanMode::FanIn;
  Nonlinearity nonlinearity = Nonlinearity::LeakyReLU;
  std::optional<std::uint64_t> seed = std::nullopt;
};

// Uniform in [-b, b] with b = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).
const Tensor& kaiming_uniform_(const Tensor& t, KaimingOptions opts = {});
// Normal with mean 0 and standard deviation gain / sqrt(fan).
const Tensor& kaiming_normal_(const Tensor& t, KaimingOptions opts = {});
// Uniform in [-b, b] with b = gain * sqrt(6 / (fan_in + fan_out)).
const Tensor& xavier_uniform_(const Tensor& t, double gain = 1,
                              std::optional<std::uint64_t> seed = std::nullopt);
// Normal with mean 0 and standard deviation gain * sqrt(2 / (fan_in + fan_out)).
const Tensor& xavier_normal_(const Tensor& t, double gain = 1,
                             std::optional<std::uint64_t> seed = std::nullopt);
const Tensor& uniform_(const Tensor& t, double low = 0, double high = 1,
                       std::optional<std::uint64_t> seed = std::nullopt);
const Tensor& normal_(const Tensor& t, double mean = 0, double stddev = 1,
                      std::optional<std::uint64_t> seed = std::nullopt);
// A (semi-)orthogonal matrix scaled by gain, as torch.nn.init.orthogonal_: the tensor is seen as
// [size(0), numel / size(0)]; the Q factor of a normal matrix's QR decomposition (signs making
// R's diagonal positive), so rows (or columns, whichever are fewer) are orthonormal times gain.
const Tensor& orthogonal_(const Tensor& t, double gain = 1,
                          std::optional<std::uint64_t> seed = std::nullopt);
const Tensor& constant_(const Tensor& t, double value);
const Tensor& zeros_(const Tensor& t);
const Tensor& ones_(const Tensor& t);

}  // namespace remat::nn::init
