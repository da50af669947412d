// Pooling (ops/pool.h) against PyTorch: max_pool2d values and indices (padding, dilation,
// ceil_mode, ties, unbatched input), avg_pool2d (count_include_pad, ceil_mode, divisor_override),
// adaptive_avg_pool2d; float32 gradients; float64 gradient checks of first and second order
// (the second derivative of max pooling gathers at the argmax indices); errors.
#include "ops/pool.h"

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
  static const auto cases = testing::load_fixture("pool");
  return cases;
}

Size2 size2(const std::vector<std::int64_t>& v) {
  return {v.at(0), v.at(1)};
}

const Tensor& input_for(const std::string& name) {
  return find_case(fixture(), name.ends_with("_f64") ? "input_f64" : "input_f32")["x"];
}

TEST(MaxPool2d, ValuesAndIndicesMatchPyTorch) {
  int checked = 0;
  for (const auto& c : fixture()) {
    if (!c.name.starts_with("max_") || !c.tensors.count("indices") || c.name == "max_ties")
      continue;
    SCOPED_TRACE(c.name);
    const MaxPool2dOptions o{.kernel_size = size2(c.list("kernel")),
                             .stride = size2(c.list("stride")),
                             .padding = size2(c.list("padding")),
                             .dilation = size2(c.list("dilation")),
                             .ceil_mode = c.num("ceil_mode") != 0};
    auto [y, idx] = max_pool2d_with_indices(input_for(c.name), o);
    EXPECT_TRUE(bit_equal(y, c["y"]));  // a maximum is an exact copy of an input
    EXPECT_TRUE(all_close(idx, c["indices"], 0, 0));
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

TEST(MaxPool2d, TiesPickTheFirstMaximum) {
  const auto& c = find_case(fixture(), "max_ties");
  auto [y, idx] = max_pool2d_with_indices(c["x"], {.kernel_size = 3, .stride = 1, .padding = 1});
  EXPECT_TRUE(bit_equal(y, c["y"]));
  EXPECT_TRUE(all_close(idx, c["indices"], 0, 0));
}

TEST(MaxPool2d, DefaultStrideAndPositionalFormAndUnbatchedInput) {
  const auto& c = find_case(fixture(), "max_unbatched");  // kernel 2, stride defaults to 2
  EXPECT_TRUE(bit_equal(max_pool2d(c["x"], {.kernel_size = 2}), c["y"]));
  EXPECT_TRUE(bit_equal(max_pool2d(c["x"], 2, 2), c["y"]));
  const auto& k = find_case(fixture(), "max_nonsquare_f32");
  EXPECT_TRUE(bit_equal(max_pool2d(input_for(k.name), {3, 2}, {2, 1}, {1, 0}), k["y"]));
}

TEST(MaxPool2d, NanIsTheMaximum) {
  Tensor x = tensor<float>({1, std::nanf(""), 3, 2}, Shape{1, 1, 2, 2});
  auto [y, idx] = max_pool2d_with_indices(x, {.kernel_size = 2});
  EXPECT_TRUE(std::isnan(y.item<float>()));
  EXPECT_EQ(idx.item<std::int64_t>(), 1);
}

TEST(AvgPool2d, MatchesPyTorch) {
  int checked = 0;
  for (const auto& c : fixture()) {
    if (!c.name.starts_with("avg_") || c.name == "avg_grad") continue;
    SCOPED_TRACE(c.name);
    AvgPool2dOptions o{.kernel_size = size2(c.list("kernel")),
                       .stride = size2(c.list("stride")),
                       .padding = size2(c.list("padding")),
                       .ceil_mode = c.num("ceil_mode") != 0,
                       .count_include_pad = c.num("count_include_pad") != 0};
    if (c.numbers.count("divisor"))
      o.divisor_override = static_cast<std::int64_t>(c.num("divisor"));
    const double tol = c.name.ends_with("_f32") ? 1e-6 : 1e-14;
    EXPECT_TRUE(all_close(avg_pool2d(input_for(c.name), o), c["y"], tol, tol));
    ++checked;
  }
  EXPECT_EQ(checked, 7);
  const auto& k = find_case(fixture(), "avg_exclude_pad_f32");
  EXPECT_TRUE(all_close(avg_pool2d(input_for(k.name), 3, 2, 1, false), k["y"], 1e-6, 1e-6));
}

TEST(AdaptiveAvgPool2d, MatchesPyTorch) {
  int checked = 0;
  for (const auto& c : fixture()) {
    if (!c.name.starts_with("adaptive_") || c.name == "adaptive_grad") continue;
    SCOPED_TRACE(c.name);
    const double tol = c.name.ends_with("_f32") ? 1e-6 : 1e-14;
    EXPECT_TRUE(
        all_close(adaptive_avg_pool2d(input_for(c.name), size2(c.list("size"))), c["y"], tol, tol));
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(Pool2d, Float32GradientsMatchPyTorch) {
  auto check = [](const std::string& name, const std::function<Tensor(const Tensor&)>& f) {
    SCOPED_TRACE(name);
    const auto& c = find_case(fixture(), name);
    Tensor x = detach(c["x"]).set_requires_grad(true);
    auto g = grad({sum(mul(f(x), c["gy"]))}, {x});
    EXPECT_TRUE(all_close(g[0], c["gx"], 1e-6, 1e-6));
  };
  check("max_grad", [](const Tensor& x) { return max_pool2d(x, 3, 2, 1); });
  check("avg_grad", [](const Tensor& x) {
    return avg_pool2d(x, {.kernel_size = 3,
                          .stride = 2,
                          .padding = 1,
                          .ceil_mode = true,
                          .count_include_pad = false});
  });
  check("adaptive_grad", [](const Tensor& x) { return adaptive_avg_pool2d(x, {3, 5}); });
}

// Pooling is piecewise linear, so a second derivative only flows when the gradient entering
// the pooling backward depends on the input: the checks square the pooled output.
Tensor squared(const Tensor& t) {
  return mul(t, t);
}

TEST(MaxPool2d, GradcheckAndGradgradcheck) {
  // Distinct random values, so no window has a tie within the finite-difference step.
  auto f = [](MaxPool2dOptions o) {
    return [o](const std::vector<Tensor>& in) { return squared(max_pool2d(in[0], o)); };
  };
  EXPECT_TRUE(
      gradcheck(f({.kernel_size = 3, .stride = 2, .padding = 1}), {leaf64({2, 2, 6, 7}, 1)}));
  EXPECT_TRUE(
      gradcheck(f({.kernel_size = {2, 3}, .stride = 1, .dilation = {2, 1}, .ceil_mode = true}),
                {leaf64({1, 2, 5, 6}, 2)}));
  EXPECT_TRUE(
      gradgradcheck(f({.kernel_size = 3, .stride = 2, .padding = 1}), {leaf64({2, 2, 6, 7}, 3)}));
  EXPECT_TRUE(gradgradcheck(f({.kernel_size = 2, .stride = 1}), {leaf64({1, 2, 4, 5}, 4)}));
  // Third order: the gather in the second derivative is differentiable too.
  auto first = [](const std::vector<Tensor>& in) {
    Tensor y = max_pool2d(in[0], {.kernel_size = 2, .stride = 1});
    return grad({sum(mul(squared(y), y))}, {in[0]}, {}, true, true)[0];
  };
  EXPECT_TRUE(gradgradcheck(first, {leaf64({1, 1, 4, 4}, 5)}));
}

TEST(AvgPool2d, GradcheckAndGradgradcheck) {
  auto f = [](AvgPool2dOptions o) {
    return [o](const std::vector<Tensor>& in) { return squared(avg_pool2d(in[0], o)); };
  };
  const std::vector<AvgPool2dOptions> opts = {
      {.kernel_size = 3, .stride = 2, .padding = 1},
      {.kernel_size = 3, .stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false},
      {.kernel_size = {2, 3}, .stride = {1, 2}, .padding = {1, 0}, .divisor_override = 4},
  };
  std::uint64_t seed = 10;
  for (const auto& o : opts) {
    EXPECT_TRUE(gradcheck(f(o), {leaf64({2, 2, 5, 6}, seed++)}));
    EXPECT_TRUE(gradgradcheck(f(o), {leaf64({1, 2, 5, 6}, seed++)}));
  }
}

TEST(AdaptiveAvgPool2d, GradcheckAndGradgradcheck) {
  for (Size2 s : {Size2{3, 4}, Size2{1, 1}, Size2{7, 3}}) {
    auto f = [s](const std::vector<Tensor>& in) { return squared(adaptive_avg_pool2d(in[0], s)); };
    EXPECT_TRUE(gradcheck(f, {leaf64({2, 2, 5, 6}, 20 + s.h)}));
    EXPECT_TRUE(gradgradcheck(f, {leaf64({1, 2, 5, 6}, 30 + s.h)}));
  }
}

TEST(Pool2d, ErrorsNameTheOpAndShapes) {
  EXPECT_TRUE(throws_with(
      [] {
        max_pool2d(zeros({1, 1, 5, 5}), {.kernel_size = 2, .padding = 2});
      },
      {"max_pool2d", "padding (2, 2)", "[1, 1, 5, 5]"}));
  EXPECT_TRUE(throws_with(
      [] {
        max_pool2d(zeros({1, 1, 2, 2}), {.kernel_size = 3});
      },
      {"max_pool2d", "[1, 1, 2, 2]", "too small"}));
  EXPECT_TRUE(throws_with(
      [] {
        max_pool2d(zeros({4, 4}), {.kernel_size = 2});
      },
      {"max_pool2d", "[4, 4]"}));
  EXPECT_TRUE(throws_with(
      [] {
        max_pool2d(zeros({1, 1, 4, 4}, {.dtype = DType::Int64}), {.kernel_size = 2});
      },
      {"max_pool2d", "int64", "[1, 1, 4, 4]"}));
  EXPECT_TRUE(throws_with(
      [] {
        max_pool2d(zeros({1, 1, 4, 4}), {.kernel_size = 2, .stride = {0, 1}});
      },
      {"max_pool2d", "stride (0, 1)"}));
  EXPECT_TRUE(throws_with(
      [] {
        avg_pool2d(zeros({1, 1, 5, 5}), {.kernel_size = 3, .padding = 2});
      },
      {"avg_pool2d", "padding (2, 2)", "[1, 1, 5, 5]"}));
  EXPECT_TRUE(throws_with(
      [] {
        avg_pool2d(zeros({2, 5, 5}), {.kernel_size = 2, .divisor_override = 0});
      },
      {"avg_pool2d", "divisor_override"}));
  EXPECT_TRUE(throws_with(
      [] {
        adaptive_avg_pool2d(zeros({1, 1, 4, 4}), {0, 2});
      },
      {"adaptive_avg_pool2d", "(0, 2)", "[1, 1, 4, 4]"}));
  EXPECT_TRUE(throws_with(
      [] {
        adaptive_avg_pool2d(zeros({1, 2, 3, 4, 4}), 2);
      },
      {"adaptive_avg_pool2d", "[1, 2, 3, 4, 4]"}));
}

}  // namespace
}  // namespace remat
