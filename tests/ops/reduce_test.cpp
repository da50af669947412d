// Reductions (ops/reduce.h) against PyTorch: sum/mean/var over dims, max/min with indices
// (first occurrence at ties), argmax/argmin, sum_to, strided inputs, gradients and errors.
#include <functional>

#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

using testing::all_close;
using testing::bit_equal;
using testing::find_case;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

const std::vector<testing::FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("reduce");
  return cases;
}

class ReduceValues : public ::testing::TestWithParam<std::string> {
 protected:
  // float32 sums accumulate in double here and in float pairs in PyTorch.
  double rtol() const { return GetParam() == "f32" ? 1e-5 : 1e-12; }
  double atol() const { return GetParam() == "f32" ? 1e-5 : 1e-12; }
};

TEST_P(ReduceValues, SumMeanVarMatchPyTorch) {
  const auto& c = find_case(fixture(), "sum_mean_var_" + GetParam());
  const Tensor& x = c["x"];
  const std::vector<std::pair<std::string, Tensor>> got = {
      {"sum_all", sum(x)},
      {"sum_1", sum(x, {1})},
      {"sum_0_2", sum(x, {0, 2})},
      {"sum_m1_keep", sum(x, {-1}, true)},
      {"sum_0_m1_keep", sum(x, {-1, 0}, true)},
      {"mean_all", mean(x)},
      {"mean_1", mean(x, {1})},
      {"mean_0_2_keep", mean(x, {0, 2}, true)},
      {"var_all", var(x)},
      {"var_all_c0", var(x, {}, 0)},
      {"var_1", var(x, {1})},
      {"var_m1_c0_keep", var(x, {-1}, 0, true)},
      {"var_0_2", var(x, {0, 2})},
      {"var_0_2_c0", var(x, {0, 2}, 0)},
      {"var_0_2_c2", var(x, {2, 0}, 2)},
  };
  for (const auto& [key, t] : got) EXPECT_TRUE(all_close(t, c[key], rtol(), atol())) << key;
}

TEST_P(ReduceValues, ReductionsOfTransposedInputsMatchPyTorch) {
  const auto& c = find_case(fixture(), "sum_mean_var_" + GetParam());
  const Tensor xt = transpose(c["x"], 0, 2);
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_TRUE(all_close(sum(xt, {1}), c["t_sum_1"], rtol(), atol()));
  EXPECT_TRUE(all_close(sum(xt, {0, 2}), c["t_sum_0_2"], rtol(), atol()));
  EXPECT_TRUE(all_close(mean(xt, {-1}), c["t_mean_m1"], rtol(), atol()));
  EXPECT_TRUE(all_close(var(xt, {0}), c["t_var_0"], rtol(), atol()));
  auto [v, i] = max(xt, 1);
  EXPECT_TRUE(bit_equal(v, c["t_max_v"]));
  EXPECT_TRUE(bit_equal(i, c["t_max_i"]));
}

TEST_P(ReduceValues, ExtremesAndIndicesMatchPyTorch) {
  const auto& c = find_case(fixture(), "extremes_" + GetParam());
  const Tensor &x = c["x"], &ties = c["ties"];
  auto expect_pair = [&](std::pair<Tensor, Tensor> p, const std::string& v, const std::string& i) {
    EXPECT_TRUE(bit_equal(p.first, c[v])) << v;
    EXPECT_EQ(p.second.dtype(), DType::Int64) << i;
    EXPECT_TRUE(bit_equal(p.second, c[i])) << i;
  };
  expect_pair(max(x, 1), "max_1_v", "max_1_i");
  expect_pair(min(x, 0), "min_0_v", "min_0_i");
  expect_pair(max(x, -1, true), "max_m1_keep_v", "max_m1_keep_i");
  EXPECT_TRUE(bit_equal(max(x), c["max_all"]));
  EXPECT_TRUE(bit_equal(min(x), c["min_all"]));
  EXPECT_TRUE(bit_equal(argmax(x, 2), c["argmax_2"]));
  EXPECT_TRUE(bit_equal(argmin(x, 1, true), c["argmin_1_keep"]));
  // Repeated extremes: the first occurrence, as PyTorch on the CPU.
  expect_pair(max(ties, 1), "ties_max_1_v", "ties_max_1_i");
  EXPECT_TRUE(bit_equal(min(ties, 0).second, c["ties_min_0_i"]));
  EXPECT_TRUE(bit_equal(argmax(ties, 0), c["ties_argmax_0"]));
  EXPECT_TRUE(bit_equal(argmin(ties, 1), c["ties_argmin_1"]));
}

TEST_P(ReduceValues, GradientsAtTiesMatchPyTorch) {
  const auto& c = find_case(fixture(), "extremes_" + GetParam());
  auto grad_of = [&](const std::function<Tensor(const Tensor&)>& f) {
    Tensor t = detach(c["ties"]).set_requires_grad(true);
    backward(f(t));
    return t.grad();
  };
  // max along a dim sends the gradient to the returned (first) index ...
  EXPECT_TRUE(bit_equal(grad_of([](const Tensor& t) { return sum(max(t, 1).first); }),
                        c["ties_max_1_grad"]));
  // ... while max()/min() over everything share it equally among the ties.
  EXPECT_TRUE(all_close(grad_of([](const Tensor& t) { return max(t); }), c["ties_max_all_grad"]));
  EXPECT_TRUE(all_close(grad_of([](const Tensor& t) { return min(t); }), c["ties_min_all_grad"]));
}

TEST_P(ReduceValues, SumToMatchesPyTorch) {
  const auto& c = find_case(fixture(), "sum_to_" + GetParam());
  const Tensor& y = c["y"];
  EXPECT_TRUE(all_close(sum_to(y, {3, 1}), c["to_3_1"], rtol(), atol()));
  EXPECT_TRUE(all_close(sum_to(y, {4}), c["to_4"], rtol(), atol()));
  EXPECT_TRUE(all_close(sum_to(y, {1, 3, 4}), c["to_1_3_4"], rtol(), atol()));
  EXPECT_TRUE(all_close(sum_to(y, {}), c["to_scalar"], rtol(), atol()));
  EXPECT_TRUE(same(sum_to(y, {2, 3, 4}), y));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ReduceValues, ::testing::Values("f32", "f64"));

TEST(ReduceOps, Int64ReductionsMatchPyTorch) {
  const auto& c = find_case(fixture(), "int64");
  const Tensor& x = c["x"];
  EXPECT_TRUE(bit_equal(sum(x), c["sum_all"]));
  EXPECT_EQ(sum(x).dtype(), DType::Int64);
  EXPECT_TRUE(bit_equal(sum(x, {1}), c["sum_1"]));
  auto [v, i] = max(x, 0);
  EXPECT_TRUE(bit_equal(v, c["max_0_v"]));
  EXPECT_TRUE(bit_equal(i, c["max_0_i"]));
  EXPECT_TRUE(bit_equal(argmin(x, 1), c["argmin_1"]));
}

// Summing the leading dims of a contiguous tensor takes a row-wise path; a strided copy of the
// same values takes the general one.  Both add each column's rows in order: the same bits, at
// widths around the path's block of 256 columns and for both float dtypes.
TEST(ReduceOps, LeadingDimSumsAreBitIdenticalToTheGeneralPath) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (std::int64_t cols : {2, 7, 256, 300, 1000}) {
      const Tensor x = uniform({13, 3, cols}, -1, 1, {.dtype = dtype, .seed = 77});
      // The same values behind strides that are not contiguous.
      const Tensor strided = permute(contiguous(permute(x, {2, 0, 1})), {1, 2, 0});
      ASSERT_FALSE(strided.is_contiguous());
      EXPECT_TRUE(bit_equal(sum(x, {0, 1}), sum(strided, {0, 1}))) << cols;
      EXPECT_TRUE(bit_equal(sum(x, {0}), sum(strided, {0}))) << cols;
    }
  }
}

TEST(ReduceOps, ShapesWithAndWithoutKeepdim) {
  Tensor x = zeros({2, 3, 4, 5});
  EXPECT_EQ(sum(x, {1, 3}).shape(), (Shape{2, 4}));
  EXPECT_EQ(sum(x, {1, 3}, true).shape(), (Shape{2, 1, 4, 1}));
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_EQ(sum(x, {}, true).shape(), (Shape{1, 1, 1, 1}));
  EXPECT_EQ(max(x, -2).first.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(argmax(x, 0, true).shape(), (Shape{1, 3, 4, 5}));
  // Reducing an empty dim with a sum gives zeros, as PyTorch.
  Tensor e = zeros({0, 3});
  EXPECT_TRUE(all_close(sum(e, {0}), zeros({3})));
}

TEST(ReduceOps, ErrorsNameTheOpAndShape) {
  Tensor x = zeros({2, 3});
  EXPECT_TRUE(throws_with([&] { sum(x, {2}); }, {"sum", "dim 2"}));
  EXPECT_TRUE(throws_with([&] { sum(x, {1, -1}); }, {"sum", "repeated"}));
  EXPECT_TRUE(throws_with([&] { mean(x, {-3}); }, {"mean", "dim -3"}));
  EXPECT_TRUE(throws_with([&] { mean(zeros({2}, {.dtype = DType::Int64})); }, {"mean", "int64"}));
  EXPECT_TRUE(throws_with([&] { var(zeros({2}, {.dtype = DType::Int64})); }, {"var", "int64"}));
  Tensor empty = zeros({2, 0});
  EXPECT_TRUE(throws_with([&] { max(empty, 1); }, {"max", "empty", "[2, 0]"}));
  EXPECT_TRUE(throws_with([&] { argmin(empty, 1); }, {"min", "empty", "[2, 0]"}));
  EXPECT_TRUE(throws_with([&] { max(empty); }, {"max", "empty", "[2, 0]"}));
  EXPECT_TRUE(throws_with([&] { min(empty); }, {"min", "empty", "[2, 0]"}));
  EXPECT_TRUE(throws_with([&] { sum_to(x, {2}); }, {"sum_to", "[2, 3]", "to [2]"}));
  EXPECT_TRUE(throws_with([&] { sum_to(x, {1, 2, 3}); }, {"sum_to", "[2, 3]", "[1, 2, 3]"}));
}

struct GradCase {
  std::string name;
  Shape shape;
  std::function<Tensor(const Tensor&)> fn;
};

std::vector<GradCase> grad_cases() {
  return {
      {"sum_all", {3, 4}, [](const Tensor& x) { return sum(x); }},
      {"sum_dim", {2, 3, 4}, [](const Tensor& x) { return sum(x, {1}); }},
      {"sum_dims_keep",
       {2, 3, 4},
       [](const Tensor& x) {
         return sum(x, {0, -1}, true);
       }},
      {"sum_transposed", {2, 3, 4}, [](const Tensor& x) { return sum(transpose(x, 0, 2), {1}); }},
      {"mean_all", {3, 4}, [](const Tensor& x) { return mean(x); }},
      {"mean_dims",
       {2, 3, 4},
       [](const Tensor& x) {
         return mean(x, {0, 2});
       }},
      {"var_c1", {3, 5}, [](const Tensor& x) { return var(x, {1}); }},
      {"var_c0_keep", {3, 5}, [](const Tensor& x) { return var(x, {0}, 0, true); }},
      {"var_all", {2, 3, 2}, [](const Tensor& x) { return var(x); }},
      {"max_dim", {3, 5}, [](const Tensor& x) { return max(x, 1).first; }},
      {"min_dim_keep", {3, 5}, [](const Tensor& x) { return min(x, 0, true).first; }},
      {"max_transposed",
       {3, 4, 2},
       [](const Tensor& x) { return max(transpose(x, 0, 2), -1).first; }},
      {"max_all", {3, 4}, [](const Tensor& x) { return max(x); }},
      {"min_all", {3, 4}, [](const Tensor& x) { return min(x); }},
      {"sum_to",
       {2, 3, 4},
       [](const Tensor& x) {
         return sum_to(x, {3, 1});
       }},
  };
}

TEST(ReduceOps, GradientsMatchFiniteDifferences) {
  std::uint64_t seed = 200;
  for (const auto& gc : grad_cases()) {
    Tensor x = leaf64(gc.shape, ++seed);
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return gc.fn(in[0]); }, {x}))
        << gc.name;
    // Squaring after the reduction makes the second derivative pass through the reduction's
    // backward (and, for var, through its own non-linearity).
    EXPECT_TRUE(gradgradcheck(
        [&](const std::vector<Tensor>& in) {
          Tensor y = gc.fn(in[0]);
          return mul(y, y);
        },
        {x}))
        << gc.name;
  }
}

TEST(ReduceOps, GradientOfMaxAlongDimGoesToTheIndex) {
  Tensor x = detach(tensor<double>({1, 5, 2, 7, 0, 3}, Shape{2, 3})).set_requires_grad(true);
  backward(sum(max(x, 1).first));
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({0, 1, 0, 1, 0, 0}, Shape{2, 3})));
}

}  // namespace
}  // namespace remat
