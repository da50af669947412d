// Edge cases against PyTorch (tests/fixtures/gen_semantics.py): NaN through relu and clamp,
// clamp with min > max, pow's derivatives where a = 0, and integer division: true division,
// floor_divide and remainder with Python's signs.
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::bit_equal;
using testing::find_case;
using testing::throws_with;

const std::vector<testing::FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("semantics");
  return cases;
}

TEST(Semantics, NanPropagatesThroughReluAndClamp) {
  const auto& c = find_case(fixture(), "nan");
  const Tensor& x = c["x"];
  EXPECT_TRUE(all_close(relu(x), c["relu"], 0, 0));
  EXPECT_TRUE(std::isnan(relu(x).at<double>({0})));
  EXPECT_TRUE(all_close(clamp(x, -0.5, 1.0), c["clamp"], 0, 0));
  // min > max: every element is max, as in PyTorch (it used to throw).
  EXPECT_TRUE(all_close(clamp(x, 1.0, -1.0), c["clamp_inverted"], 0, 0));
  EXPECT_TRUE(
      all_close(clamp(to_dtype(x, DType::Float32), 0.75, 0.25), c["clamp_inverted_f32"], 0, 0));
}

TEST(Semantics, PowDerivativesAtZero) {
  const auto& c = find_case(fixture(), "pow_at_zero");
  Tensor a = clone(c["a"]).set_requires_grad(true), b = clone(c["b"]).set_requires_grad(true);
  Tensor y = pow(a, b);
  EXPECT_TRUE(all_close(y, c["y"], 1e-12, 1e-12));
  const auto g = grad({sum(y)}, {a, b});
  // d/da at a = 0, b = 0 is 0 (not 0 * inf); d/db at a = 0 is 0 for b >= 0 and -inf for b < 0.
  EXPECT_TRUE(all_close(g[0], c["ga"], 1e-12, 1e-12));
  EXPECT_TRUE(all_close(g[1], c["gb"], 1e-12, 1e-12));
}

TEST(Semantics, IntegerDivisionAsPyTorch) {
  const auto& c = find_case(fixture(), "int_division");
  const Tensor &a = c["a"], &b = c["b"];
  EXPECT_EQ(div(a, b).dtype(), DType::Float32);
  EXPECT_TRUE(all_close(div(a, b), c["div"], 1e-6, 1e-6));
  EXPECT_TRUE(all_close(a / 2.5, c["div_scalar"], 1e-6, 1e-6));
  EXPECT_TRUE(bit_equal(floor_divide(a, b), c["floor_divide"]));
  EXPECT_TRUE(bit_equal(remainder(a, b), c["remainder"]));
  EXPECT_TRUE(bit_equal(floor_divide(a, 4.0), c["floor_divide_scalar"]));
  EXPECT_TRUE(bit_equal(remainder(a, -4.0), c["remainder_scalar"]));
  EXPECT_TRUE(
      throws_with([&] { floor_divide(a, mul(b, 0.0)); }, {"floor_divide", "division by zero"}));
  EXPECT_TRUE(throws_with([&] { remainder(a, 0.0); }, {"remainder", "division by zero"}));
  // The most negative integer divided by -1 wraps instead of trapping.
  Tensor lowest = tensor<std::int64_t>({std::numeric_limits<std::int64_t>::min()});
  EXPECT_EQ(floor_divide(lowest, -1.0).item<std::int64_t>(),
            std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(remainder(lowest, -1.0).item<std::int64_t>(), 0);
}

TEST(Semantics, FloatFloorDivideAndRemainderWithDerivatives) {
  const auto& c = find_case(fixture(), "float_division");
  Tensor a = clone(c["a"]).set_requires_grad(true), b = clone(c["b"]).set_requires_grad(true);
  EXPECT_TRUE(all_close(floor_divide(a, b), c["floor_divide"], 0, 0));
  // No derivative, as in PyTorch: differentiating through it is an error naming it.
  EXPECT_TRUE(throws_with([&] { backward(sum(floor_divide(a, b))); },
                          {"op floor_divide has no derivative"}));
  const auto g = grad({sum(remainder(a, b))}, {a, b});
  EXPECT_TRUE(all_close(remainder(a, b), c["remainder"], 1e-12, 1e-12));
  EXPECT_TRUE(all_close(g[0], c["remainder_ga"], 0, 0));
  EXPECT_TRUE(all_close(g[1], c["remainder_gb"], 0, 0));
}

}  // namespace
}  // namespace remat
