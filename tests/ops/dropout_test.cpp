// dropout (ops/dropout.h): the mask is a pure function of the op's Philox key (same seed, same
// generator state and a replay of the recorded op all give identical bits), the kept fraction
// is within a binomial bound of 1 - p, kept values are x / (1 - p), the gradient is
// mask / (1 - p), the special cases p = 0, p = 1 and evaluation, and errors.
#include "ops/dropout.h"

#include <cmath>
#include <functional>

#include "dtr/cell.h"
#include "ops/op.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

using testing::all_close;
using testing::bit_equal;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

// Values away from zero, so a zero output means a dropped element.
Tensor nonzero_input(const Shape& shape, std::uint64_t seed, DType dtype = DType::Float32) {
  Tensor u = uniform(shape, 0.5, 2.0, {.dtype = dtype, .seed = seed});
  Tensor s = sub(mul(gt(uniform(shape, 0, 1, {.dtype = dtype, .seed = seed + 1}), 0.5), 2.0), 1.0);
  return mul(u, s);
}

TEST(Dropout, SameSeedSameMask) {
  Tensor x = nonzero_input({64, 33}, 1);
  EXPECT_TRUE(bit_equal(dropout(x, 0.3, true, 7), dropout(x, 0.3, true, 7)));
  EXPECT_FALSE(bit_equal(dropout(x, 0.3, true, 7), dropout(x, 0.3, true, 8)));
}

TEST(Dropout, DefaultGeneratorIsReproducibleAndAdvances) {
  Tensor x = nonzero_input({1000}, 2);
  manual_seed(123);
  Tensor a = dropout(x, 0.5, true);
  Tensor b = dropout(x, 0.5, true);
  manual_seed(123);
  Tensor c = dropout(x, 0.5, true);
  EXPECT_TRUE(bit_equal(a, c));
  EXPECT_FALSE(bit_equal(a, b));
}

// Runs the recorded op of y's cell again on a fresh buffer, as a rematerialization would.
TEST(Dropout, ReplayOfTheRecordRedrawsTheSameMask) {
  Tensor x = nonzero_input({37, 29}, 3);
  Tensor y = dropout(x, 0.4, true);
  const auto& record = static_cast<Cell&>(*y.storage()).record();
  ASSERT_TRUE(record);
  ASSERT_EQ(record->inputs.size(), 1u);
  std::vector<float> again(static_cast<std::size_t>(y.numel()), -1.0f);
  KernelArg in{&record->input_metas[0], record->inputs[0]->buffer()};
  KernelArg out{&record->output_metas[0], again.data()};
  record->producer->execute({&in, 1}, {&out, 1});
  EXPECT_TRUE(bit_equal(tensor<float>(again, y.shape()), y));
}

TEST(Dropout, KeptFractionAndValues) {
  for (const double p : {0.1, 0.5, 0.8}) {
    const std::int64_t n = 1 << 16;  // 256 KiB: the suite also runs under a 1 MiB budget
    Tensor x = nonzero_input({n}, 4);
    Tensor y = dropout(x, p, true, 11);
    const auto xs = x.to_vector<float>(), ys = y.to_vector<float>();
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (ys[i] == 0.0f) continue;
      ++kept;
      ASSERT_EQ(ys[i], xs[i] * scale) << "element " << i << " p " << p;
    }
    // Binomial(n, 1 - p): 6 standard deviations.
    const double expected = n * (1 - p), sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(kept), expected, 6 * sd) << "p " << p;
  }
}

TEST(Dropout, GradientIsMaskOverKeepProbability) {
  const double p = 0.35;
  Tensor x = nonzero_input({50, 40}, 5);
  x.set_requires_grad(true);
  Tensor y = dropout(x, p, true, 13);
  Tensor g = grad({sum(y)}, {x})[0];
  Tensor mask = ne(y, 0.0);
  EXPECT_TRUE(
      all_close(g, mul(mask, static_cast<double>(static_cast<float>(1.0 / (1.0 - p)))), 0, 0));
}

TEST(Dropout, GradcheckAndGradgradcheck) {
  Tensor x = leaf64({4, 6}, 51);
  testing::Fn fn = [](const std::vector<Tensor>& in) { return dropout(in[0], 0.3, true, 17); };
  EXPECT_TRUE(gradcheck(fn, {x}));
  EXPECT_TRUE(gradgradcheck(fn, {x}));
}

TEST(Dropout, StridedInputUsesLogicalOrder) {
  Tensor x = nonzero_input({6, 9}, 6);
  Tensor xt = transpose(x, 0, 1);
  EXPECT_TRUE(bit_equal(dropout(xt, 0.5, true, 19), dropout(contiguous(xt), 0.5, true, 19)));
}

TEST(Dropout, SpecialCases) {
  Tensor x = nonzero_input({8, 3}, 7);
  EXPECT_TRUE(same(dropout(x, 0.5, false), x));
  EXPECT_TRUE(same(dropout(x, 0.0, true), x));
  Tensor xg = detach(x);
  xg.set_requires_grad(true);
  Tensor z = dropout(xg, 1.0, true);
  EXPECT_TRUE(all_close(z, zeros({8, 3}), 0, 0));
  EXPECT_TRUE(all_close(grad({sum(z)}, {xg})[0], zeros({8, 3}), 0, 0));
  Tensor d = nonzero_input({100}, 8, DType::Float64);
  Tensor yd = dropout(d, 0.5, true, 3);
  EXPECT_EQ(yd.dtype(), DType::Float64);
  // Float32 and float64 draw the same mask for the same key.
  EXPECT_TRUE(bit_equal(
      ne(yd, 0.0),
      to_dtype(ne(dropout(to_dtype(d, DType::Float32), 0.5, true, 3), 0.0), DType::Float64)));
}

TEST(Dropout, Errors) {
  Tensor x = zeros({2, 3});
  EXPECT_TRUE(throws_with([&] { dropout(x, 1.5, true); }, {"dropout", "1.5", "[0, 1]"}));
  EXPECT_TRUE(throws_with([&] { dropout(x, -0.1, true); }, {"dropout", "-0.1"}));
  EXPECT_TRUE(throws_with([&] { dropout(x, std::nan(""), false); }, {"dropout", "nan"}));
  EXPECT_TRUE(throws_with([&] { dropout(arange(0, 4), 0.5, true); }, {"dropout", "int64"}));
}

}  // namespace
}  // namespace remat
