#include "nn/init.h"

#include <cmath>
#include <string_view>

#include "autograd/grad_mode.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/inplace.h"

namespace remat::nn::init {
namespace {

void check_floating(std::string_view fn, const Tensor& t) {
  REMAT_CHECK(t.defined(), "{}: undefined tensor", fn);
  REMAT_CHECK(is_floating(t.dtype()), "{}: expected a floating-point tensor, got {} of shape {}",
              fn, t.dtype(), t.shape());
}

// Writes `values` into t in place.  Outside the graph: initialising a parameter is not a
// differentiable step, and t is usually a leaf that requires grad.
const Tensor& assign(const Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  copy_(t, values);
  return t;
}

RandomOptions random_options(const Tensor& t, std::optional<std::uint64_t> seed) {
  return {.dtype = t.dtype(), .device = t.device(), .requires_grad = false, .seed = seed};
}

std::int64_t fan(std::string_view fn, const Tensor& t, FanMode mode) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const std::int64_t f = mode == FanMode::FanIn ? fan_in : fan_out;
  REMAT_CHECK(f > 0, "{}: the {} of a tensor of shape {} is 0", fn,
              mode == FanMode::FanIn ? "fan_in" : "fan_out", t.shape());
  return f;
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: {
      const double slope = param.value_or(0.01);
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case Nonlinearity::SELU:
      return 3.0 / 4.0;
  }
  REMAT_THROW("calculate_gain: unknown nonlinearity {}", static_cast<int>(nonlinearity));
}

std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  REMAT_CHECK(t.defined(), "calculate_fan_in_and_fan_out: undefined tensor");
  REMAT_CHECK(t.dim() >= 2,
              "calculate_fan_in_and_fan_out: fan in and fan out need a tensor with at least 2 "
              "dims, got shape {}",
              t.shape());
  std::int64_t receptive = 1;
  for (std::int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

const Tensor& kaiming_uniform_(const Tensor& t, KaimingOptions opts) {
  check_floating("kaiming_uniform_", t);
  if (t.numel() == 0) return t;
  const double sd = calculate_gain(opts.nonlinearity, opts.a) /
                    std::sqrt(static_cast<double>(fan("kaiming_uniform_", t, opts.mode)));
  const double bound = std::sqrt(3.0) * sd;
  return assign(t, uniform(t.shape(), -bound, bound, random_options(t, opts.seed)));
}

const Tensor& kaiming_normal_(const Tensor& t, KaimingOptions opts) {
  check_floating("kaiming_normal_", t);
  if (t.numel() == 0) return t;
  const double sd = calculate_gain(opts.nonlinearity, opts.a) /
                    std::sqrt(static_cast<double>(fan("kaiming_normal_", t, opts.mode)));
  return assign(t, normal(t.shape(), 0.0, sd, random_options(t, opts.seed)));
}

const Tensor& xavier_uniform_(const Tensor& t, double gain, std::optional<std::uint64_t> seed) {
  check_floating("xavier_uniform_", t);
  if (t.numel() == 0) return t;
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const double sd = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  const double bound = std::sqrt(3.0) * sd;
  return assign(t, uniform(t.shape(), -bound, bound, random_options(t, seed)));
}

const Tensor& xavier_normal_(const Tensor& t, double gain, std::optional<std::uint64_t> seed) {
  check_floating("xavier_normal_", t);
  if (t.numel() == 0) return t;
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const double sd = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  return assign(t, normal(t.shape(), 0.0, sd, random_options(t, seed)));
}

const Tensor& uniform_(const Tensor& t, double low, double high,
                       std::optional<std::uint64_t> seed) {
  check_floating("uniform_", t);
  REMAT_CHECK(low <= high, "uniform_: low {} is above high {}", low, high);
  if (t.numel() == 0) return t;
  return assign(t, uniform(t.shape(), low, high, random_options(t, seed)));
}

const Tensor& normal_(const Tensor& t, double mean, double stddev,
                      std::optional<std::uint64_t> seed) {
  check_floating("normal_", t);
  REMAT_CHECK(stddev >= 0, "normal_: stddev must be non-negative, got {}", stddev);
  if (t.numel() == 0) return t;
  return assign(t, normal(t.shape(), mean, stddev, random_options(t, seed)));
}

const Tensor& orthogonal_(const Tensor& t, double gain, std::optional<std::uint64_t> seed) {
  check_floating("orthogonal_", t);
  REMAT_CHECK(t.dim() >= 2, "orthogonal_: needs a tensor with at least 2 dims, got shape {}",
              t.shape());
  if (t.numel() == 0) return t;
  const std::int64_t rows = t.size(0), cols = t.numel() / rows;
  // QR of the tall orientation by modified Gram-Schmidt in float64: with R's diagonal positive
  // the Q factor is unique, the one Householder QR with PyTorch's sign fix gives.
  const bool wide = rows < cols;
  const std::int64_t m = wide ? cols : rows, n = wide ? rows : cols;  // m >= n
  RandomOptions opts = random_options(t, seed);
  opts.dtype = DType::Float64;
  const std::vector<double> drawn = normal({rows, cols}, 0.0, 1.0, opts).to_vector<double>();
  std::vector<double> q(static_cast<std::size_t>(m * n));  // column j at q[j * m ...]
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t i = wide ? c : r, j = wide ? r : c;
      q[static_cast<std::size_t>(j * m + i)] = drawn[static_cast<std::size_t>(r * cols + c)];
    }
  for (std::int64_t j = 0; j < n; ++j) {
    double* qj = q.data() + j * m;
    for (std::int64_t k = 0; k < j; ++k) {
      const double* qk = q.data() + k * m;
      double dot = 0;
      for (std::int64_t i = 0; i < m; ++i) dot += qk[i] * qj[i];
      for (std::int64_t i = 0; i < m; ++i) qj[i] -= dot * qk[i];
    }
    double norm = 0;
    for (std::int64_t i = 0; i < m; ++i) norm += qj[i] * qj[i];
    norm = std::sqrt(norm);
    REMAT_CHECK(norm > 0, "orthogonal_: the random matrix for shape {} is rank deficient",
                t.shape());
    for (std::int64_t i = 0; i < m; ++i) qj[i] /= norm;
  }
  std::vector<double> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t i = wide ? c : r, j = wide ? r : c;
      out[static_cast<std::size_t>(r * cols + c)] = gain * q[static_cast<std::size_t>(j * m + i)];
    }
  return assign(t, to_dtype(tensor(out, t.shape()), t.dtype()));
}

const Tensor& constant_(const Tensor& t, double value) {
  REMAT_CHECK(t.defined(), "constant_: undefined tensor");
  NoGradGuard no_grad;
  fill_(t, value);
  return t;
}

const Tensor& zeros_(const Tensor& t) {
  return constant_(t, 0.0);
}
const Tensor& ones_(const Tensor& t) {
  return constant_(t, 1.0);
}

}  // namespace remat::nn::init
