// nn/init.h: gains and fans against PyTorch's calculate_gain and _calculate_fan_in_and_fan_out;
// the bounds of the uniform initialisers exactly and the moments of the normal ones (large
// tensors, tolerances of several standard errors); in-place writes that keep the leaf;
// reproducibility with manual_seed and explicit seeds; and errors.
#include "nn/init.h"

#include <cmath>
#include <functional>

#include "ops/linalg.h"
#include "ops/view.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

using namespace nn::init;
using testing::bit_equal;
using testing::find_case;

const testing::FixtureCase& fixture_case(const std::string& name) {
  static const auto cases = testing::load_fixture("layers");
  return find_case(cases, name);
}

struct Moments {
  double min, max, mean, std;
};
Moments moments(const Tensor& t) {
  Moments m{INFINITY, -INFINITY, 0, 0};
  double s = 0, s2 = 0;
  for (double v : t.to_vector<double>()) {
    m.min = std::min(m.min, v), m.max = std::max(m.max, v);
    s += v, s2 += v * v;
  }
  const double n = static_cast<double>(t.numel());
  m.mean = s / n;
  m.std = std::sqrt(s2 / n - m.mean * m.mean);
  return m;
}

// Uniform in [-bound, bound]: never outside, the extremes reached (n draws), mean 0 and
// standard deviation bound / sqrt(3) within 6 to 8 standard errors.
void expect_symmetric_uniform(const Tensor& t, double bound) {
  const Moments m = moments(t);
  const double n = static_cast<double>(t.numel());
  EXPECT_GE(m.min, -bound);
  EXPECT_LE(m.max, bound);
  EXPECT_LT(m.min, -bound * (1 - 20 / n));
  EXPECT_GT(m.max, bound * (1 - 20 / n));
  EXPECT_NEAR(m.mean, 0.0, 6 * bound / std::sqrt(3 * n));
  EXPECT_NEAR(m.std, bound / std::sqrt(3.0), 2 * bound / std::sqrt(n));  // about 8 standard errors
}

// Normal(mean, std): sample mean within 6 standard errors, sample std within 6 of its standard
// error (std / sqrt(2n)).
void expect_normal(const Tensor& t, double mean, double std) {
  const Moments m = moments(t);
  const double n = static_cast<double>(t.numel());
  EXPECT_NEAR(m.mean, mean, 6 * std / std::sqrt(n));
  EXPECT_NEAR(m.std, std, 6 * std / std::sqrt(2 * n));
}

Tensor param(const Shape& shape, DType dtype = DType::Float32) {
  return detach(zeros(shape, {.dtype = dtype})).set_requires_grad(true);
}

TEST(Init, GainsMatchPyTorch) {
  const auto& c = fixture_case("gains");
  EXPECT_DOUBLE_EQ(calculate_gain(Nonlinearity::Linear), c.num("gain_linear"));
  EXPECT_DOUBLE_EQ(calculate_gain(Nonlinearity::Conv), c.num("gain_conv2d"));
  EXPECT_DOUBLE_EQ(calculate_gain(Nonlinearity::Sigmoid), c.num("gain_sigmoid"));
  EXPECT_DOUBLE_EQ(calculate_gain(Nonlinearity::Tanh), c.num("gain_tanh"));
  EXPECT_DOUBLE_EQ(calculate_gain(Nonlinearity::ReLU), c.num("gain_relu"));
  EXPECT_DOUBLE_EQ(calculate_gain(Nonlinearity::LeakyReLU), c.num("gain_leaky_relu"));
  EXPECT_DOUBLE_EQ(calculate_gain(Nonlinearity::LeakyReLU, 0.2), c.num("gain_leaky_relu_0.2"));
  EXPECT_DOUBLE_EQ(calculate_gain(Nonlinearity::LeakyReLU, std::sqrt(5.0)),
                   c.num("gain_leaky_relu_sqrt5"));
  EXPECT_DOUBLE_EQ(calculate_gain(Nonlinearity::SELU), c.num("gain_selu"));
}

TEST(Init, FansMatchPyTorch) {
  const auto& c = fixture_case("fans");
  for (int i = 0; i < 4; ++i) {
    const auto shape = c.list(fmt::format("shape_{}", i));
    auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(zeros(shape));
    EXPECT_EQ(fan_in, static_cast<std::int64_t>(c.num(fmt::format("fan_in_{}", i)))) << i;
    EXPECT_EQ(fan_out, static_cast<std::int64_t>(c.num(fmt::format("fan_out_{}", i)))) << i;
  }
  EXPECT_TRUE(throws_with([] { calculate_fan_in_and_fan_out(zeros({5})); },
                          {"calculate_fan_in_and_fan_out", "[5]"}));
}

TEST(Init, DistributionParametersMatchPyTorch) {
  // The fixture's bounds and standard deviations for a [16, 8, 3, 3] weight (1152 draws).
  const auto& c = fixture_case("fans");
  Tensor w = param({16, 8, 3, 3});
  kaiming_uniform_(w, {.a = std::sqrt(5.0), .seed = 1});
  expect_symmetric_uniform(w, c.num("kaiming_uniform_bound_sqrt5"));
  xavier_uniform_(w, calculate_gain(Nonlinearity::Tanh), 2);
  expect_symmetric_uniform(w, c.num("xavier_uniform_bound_tanh"));
  kaiming_normal_(w, {.mode = FanMode::FanOut, .nonlinearity = Nonlinearity::ReLU, .seed = 3});
  expect_normal(w, 0.0, c.num("kaiming_normal_std_fan_out_relu"));
  xavier_normal_(w, 1.0, 4);
  expect_normal(w, 0.0, c.num("xavier_normal_std"));
}

TEST(Init, UniformInitialisersOnALargeTensor) {
  Tensor w = param({256, 128, 3, 3});  // fan_in 1152, fan_out 2304
  kaiming_uniform_(w, {.seed = 5});    // a = 0, leaky_relu: gain sqrt(2)
  expect_symmetric_uniform(w, std::sqrt(2.0) * std::sqrt(3.0 / 1152.0));
  kaiming_uniform_(w, {.a = 0.2, .mode = FanMode::FanOut, .seed = 6});
  expect_symmetric_uniform(w, std::sqrt(2.0 / 1.04) * std::sqrt(3.0 / 2304.0));
  xavier_uniform_(w, 1.0, 7);
  expect_symmetric_uniform(w, std::sqrt(6.0 / (1152.0 + 2304.0)));
  uniform_(w, -2.0, 3.0, 8);
  const Moments m = moments(w);
  EXPECT_GE(m.min, -2.0);
  EXPECT_LE(m.max, 3.0);
  EXPECT_LT(m.min, -1.999);
  EXPECT_GT(m.max, 2.999);
  EXPECT_NEAR(m.mean, 0.5, 6 * 5 / std::sqrt(12.0 * static_cast<double>(w.numel())));
}

TEST(Init, NormalInitialisersOnALargeTensor) {
  Tensor w = param({512, 64, 3, 3}, DType::Float64);  // fan_in 576, fan_out 4608
  kaiming_normal_(w, {.mode = FanMode::FanOut, .nonlinearity = Nonlinearity::ReLU, .seed = 9});
  expect_normal(w, 0.0, std::sqrt(2.0) / std::sqrt(4608.0));
  kaiming_normal_(w, {.nonlinearity = Nonlinearity::Tanh, .seed = 10});
  expect_normal(w, 0.0, (5.0 / 3.0) / std::sqrt(576.0));
  xavier_normal_(w, 2.0, 11);
  expect_normal(w, 0.0, 2.0 * std::sqrt(2.0 / (576.0 + 4608.0)));
  normal_(w, 1.5, 0.5, 12);
  expect_normal(w, 1.5, 0.5);
  EXPECT_EQ(w.dtype(), DType::Float64);
}

TEST(Init, InPlaceOnALeafThatRequiresGrad) {
  Tensor w = param({4, 3});
  const Tensor handle = w;
  ASSERT_TRUE(GradMode::is_enabled());
  kaiming_uniform_(w);
  EXPECT_TRUE(same(w, handle));
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(GradMode::is_enabled());
  constant_(w, 0.25);
  EXPECT_TRUE(bit_equal(w, full({4, 3}, 0.25)));
  ones_(w);
  EXPECT_TRUE(bit_equal(w, ones({4, 3})));
  zeros_(w);
  EXPECT_TRUE(bit_equal(w, zeros({4, 3})));
  Tensor counts = zeros({3}, {.dtype = DType::Int64});
  constant_(counts, 7);
  EXPECT_EQ(counts.to_vector<std::int64_t>(), (std::vector<std::int64_t>{7, 7, 7}));
  Tensor empty = param({0, 3});
  kaiming_uniform_(empty);  // nothing to fill, as PyTorch
  EXPECT_EQ(empty.numel(), 0);
}

TEST(Init, ReproducibleWithManualSeedAndExplicitSeeds) {
  Tensor a = param({64, 32}), b = param({64, 32});
  manual_seed(7);
  kaiming_uniform_(a);
  manual_seed(7);
  kaiming_uniform_(b);
  EXPECT_TRUE(bit_equal(a, b));
  kaiming_uniform_(b);  // the next key of the default generator
  EXPECT_FALSE(bit_equal(a, b));
  manual_seed(7);
  normal_(a);
  manual_seed(7);
  normal_(b);
  EXPECT_TRUE(bit_equal(a, b));

  // An explicit seed ignores the default generator.
  manual_seed(1);
  xavier_normal_(a, 1.0, 42);
  manual_seed(2);
  xavier_normal_(b, 1.0, 42);
  EXPECT_TRUE(bit_equal(a, b));
  xavier_normal_(b, 1.0, 43);
  EXPECT_FALSE(bit_equal(a, b));
}

// W W^T = gain^2 I for a wide matrix and W^T W for a tall one (closed forms); a conv weight is
// seen as [out, in * kh * kw]; the same seed gives the same matrix.
TEST(Init, OrthogonalRowsOrColumnsAreOrthonormalTimesTheGain) {
  struct Case {
    Shape shape;
    bool rows_orthonormal;
  };
  for (const Case& c :
       {Case{{5, 12}, true}, Case{{12, 5}, false}, Case{{7, 7}, true}, Case{{4, 3, 2, 2}, true}}) {
    SCOPED_TRACE(fmt::format("{}", c.shape));
    Tensor w = zeros(c.shape, {.dtype = DType::Float64});
    orthogonal_(w, 0.8, 7);
    const Tensor m = reshape(w, {c.shape[0], w.numel() / c.shape[0]});
    const Tensor gram =
        c.rows_orthonormal ? matmul(m, transpose(m, 0, 1)) : matmul(transpose(m, 0, 1), m);
    const std::int64_t n = gram.size(0);
    const std::vector<double> g = gram.to_vector<double>();
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        EXPECT_NEAR(g[static_cast<std::size_t>(i * n + j)], i == j ? 0.64 : 0.0, 1e-12);
    Tensor again = zeros(c.shape, {.dtype = DType::Float64});
    orthogonal_(again, 0.8, 7);
    EXPECT_TRUE(bit_equal(w, again));
  }
  Tensor f = param({6, 4});
  orthogonal_(f);
  const Tensor ftf = matmul(transpose(f, 0, 1), f);
  EXPECT_NEAR(ftf.to_vector<float>()[0], 1.0, 1e-5);
  EXPECT_TRUE(f.requires_grad());
  EXPECT_TRUE(throws_with([] { orthogonal_(param({5})); }, {"orthogonal_", "2 dims", "[5]"}));
}

TEST(Init, Errors) {
  Tensor ints = zeros({3, 3}, {.dtype = DType::Int64});
  EXPECT_TRUE(
      throws_with([&] { kaiming_uniform_(ints); }, {"kaiming_uniform_", "floating", "int64"}));
  EXPECT_TRUE(throws_with([&] { normal_(ints); }, {"normal_", "floating"}));
  EXPECT_TRUE(
      throws_with([] { kaiming_normal_(param({5})); }, {"calculate_fan_in_and_fan_out", "[5]"}));
  EXPECT_TRUE(throws_with([] { xavier_uniform_(param({5})); }, {"calculate_fan_in_and_fan_out"}));
  EXPECT_TRUE(throws_with([] { normal_(param({5}), 0.0, -1.0); }, {"normal_", "-1"}));
  EXPECT_TRUE(throws_with([] { uniform_(param({5}), 1.0, 0.0); }, {"uniform_", "low"}));
  EXPECT_TRUE(throws_with([] { kaiming_uniform_(Tensor()); }, {"kaiming_uniform_", "undefined"}));
}

}  // namespace
}  // namespace remat
