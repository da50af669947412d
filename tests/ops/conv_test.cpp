// conv2d (ops/conv.h) against PyTorch: stride, padding, dilation, groups (depthwise too), with
// and without bias, float32 gradients; the float32 oneDNN path against the float64 im2col path
// on shapes where oneDNN picks blocked layouts; float64 gradient checks of first and second
// order (through conv2d_backward_input / conv2d_backward_weight); primitive caching; errors.
#include "ops/conv.h"

#include <functional>

#include "ops/cpu/onednn.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

using testing::all_close;
using testing::find_case;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

const std::vector<testing::FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("conv");
  return cases;
}

Conv2dOptions options_of(const testing::FixtureCase& c) {
  const auto s = c.list("stride"), p = c.list("padding"), d = c.list("dilation");
  const int mode = static_cast<int>(c.num("padding_mode"));  // 0 numbers, 1 "same", 2 "valid"
  return {.stride = {s[0], s[1]},
          .padding = mode == 0 ? Padding2(p[0], p[1]) : Padding2(mode == 1 ? "same" : "valid"),
          .dilation = {d[0], d[1]},
          .groups = static_cast<std::int64_t>(c.num("groups"))};
}

Tensor bias_of(const testing::FixtureCase& c) {
  return c.tensors.count("b") ? c["b"] : Tensor();
}

TEST(Conv2d, MatchesPyTorchForEveryCase) {
  int checked = 0;
  for (const auto& c : fixture()) {
    SCOPED_TRACE(c.name);
    const double tol = c.name.ends_with("_f32") ? 1e-5 : 1e-12;
    Tensor y = conv2d(c["x"], c["w"], bias_of(c), options_of(c));
    EXPECT_TRUE(all_close(y, c["y"], tol, tol));
    ++checked;
  }
  EXPECT_EQ(checked, 18);
}

TEST(Conv2d, UnbatchedInput) {
  const auto& c = find_case(fixture(), "basic_f32");
  Tensor y = conv2d(select(c["x"], 0, 1), c["w"], c["b"], options_of(c));
  EXPECT_TRUE(all_close(y, select(c["y"], 0, 1), 1e-5, 1e-5));
}

TEST(Conv2d, NonContiguousInputs) {
  const auto& c = find_case(fixture(), "groups_f32");
  // The same values stored in a different order.
  Tensor x = permute(contiguous(permute(c["x"], {0, 2, 3, 1})), {0, 3, 1, 2});
  Tensor w = permute(contiguous(permute(c["w"], {2, 3, 1, 0})), {3, 2, 0, 1});
  ASSERT_FALSE(x.is_contiguous());
  EXPECT_TRUE(all_close(conv2d(x, w, c["b"], options_of(c)), c["y"], 1e-5, 1e-5));
}

TEST(Conv2d, Float32GradientsMatchPyTorch) {
  int checked = 0;
  for (const auto& c : fixture()) {
    if (!c.tensors.count("gy")) continue;
    SCOPED_TRACE(c.name);
    Tensor x = detach(c["x"]).set_requires_grad(true), w = detach(c["w"]).set_requires_grad(true);
    std::vector<Tensor> inputs{x, w};
    Tensor b;
    if (c.tensors.count("b")) inputs.push_back(b = detach(c["b"]).set_requires_grad(true));
    auto g = grad({sum(mul(conv2d(x, w, b, options_of(c)), c["gy"]))}, inputs);
    EXPECT_TRUE(all_close(g[0], c["gx"], 1e-5, 1e-5));
    EXPECT_TRUE(all_close(g[1], c["gw"], 1e-5, 1e-5));
    if (b.defined()) {
      EXPECT_TRUE(all_close(g[2], c["gb"], 1e-5, 1e-5));
    }
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

// Larger shapes, where oneDNN uses its blocked layouts and reorders: float32 (oneDNN) against
// float64 (im2col + Eigen, checked against PyTorch above) for all three directions.
TEST(Conv2d, Float32OneDnnMatchesFloat64Reference) {
  struct Case {
    Shape x, w;
    Conv2dOptions o;
  };
  const std::vector<Case> cases = {
      {{2, 16, 10, 10}, {32, 16, 3, 3}, {.padding = 1}},
      {{2, 16, 11, 10}, {32, 16, 3, 3}, {.stride = 2, .padding = 1}},
      {{2, 16, 9, 9}, {16, 8, 3, 3}, {.padding = 1, .groups = 2}},
      {{2, 16, 9, 9}, {16, 1, 3, 3}, {.stride = 2, .padding = 1, .groups = 16}},
      {{1, 8, 12, 12}, {16, 8, 3, 3}, {.padding = 2, .dilation = 2}},
      {{3, 3, 16, 16}, {16, 3, 7, 7}, {.stride = 2, .padding = 3}},
      {{2, 24, 6, 6}, {40, 24, 1, 1}, {}},
      {{2, 16, 9, 8}, {16, 16, 4, 4}, {.padding = "same"}},
      {{1, 8, 10, 10}, {16, 8, 2, 3}, {.padding = "same", .dilation = {3, 2}}},
  };
  std::uint64_t seed = 100;
  for (const auto& c : cases) {
    SCOPED_TRACE(fmt::format("x {} w {} stride {} padding {} dilation {} groups {}", c.x, c.w,
                             c.o.stride, c.o.padding, c.o.dilation, c.o.groups));
    Tensor x = uniform(c.x, -1, 1, {.dtype = DType::Float64, .seed = seed++});
    Tensor w = uniform(c.w, -0.5, 0.5, {.dtype = DType::Float64, .seed = seed++});
    Tensor b = uniform({c.w[0]}, -1, 1, {.dtype = DType::Float64, .seed = seed++});
    Tensor y = conv2d(x, w, b, c.o);
    Tensor gy = uniform(y.shape(), -1, 1, {.dtype = DType::Float64, .seed = seed++});
    auto f32 = [](const Tensor& t) { return to_dtype(t, DType::Float32); };
    EXPECT_TRUE(all_close(conv2d(f32(x), f32(w), f32(b), c.o), y, 1e-4, 1e-4));
    EXPECT_TRUE(all_close(conv2d_backward_input(f32(gy), f32(w), c.x, c.o),
                          conv2d_backward_input(gy, w, c.x, c.o), 1e-4, 1e-4));
    EXPECT_TRUE(all_close(conv2d_backward_weight(f32(x), f32(gy), c.w, c.o),
                          conv2d_backward_weight(x, gy, c.w, c.o), 1e-4, 1e-4));
  }
}

TEST(Conv2d, GradcheckFloat64) {
  auto conv = [](Conv2dOptions o) {
    return [o](const std::vector<Tensor>& in) {
      return conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), o);
    };
  };
  EXPECT_TRUE(gradcheck(conv({.padding = 1}),
                        {leaf64({2, 3, 4, 5}, 1), leaf64({2, 3, 3, 3}, 2), leaf64({2}, 3)}));
  EXPECT_TRUE(gradcheck(conv({.stride = 2, .padding = {1, 0}}),
                        {leaf64({1, 2, 6, 5}, 4), leaf64({3, 2, 3, 2}, 5)}));
  EXPECT_TRUE(gradcheck(conv({.padding = 2, .dilation = 2, .groups = 2}),
                        {leaf64({1, 4, 5, 5}, 6), leaf64({4, 2, 2, 3}, 7), leaf64({4}, 8)}));
  EXPECT_TRUE(gradcheck(conv({.stride = {1, 2}, .padding = 1, .groups = 3}),
                        {leaf64({2, 3, 4, 4}, 9), leaf64({3, 1, 3, 3}, 10)}));
  EXPECT_TRUE(gradcheck(conv({.padding = "same"}),
                        {leaf64({1, 2, 5, 4}, 16), leaf64({2, 2, 4, 2}, 17), leaf64({2}, 18)}));
}

TEST(Conv2d, GradgradcheckFloat64) {
  auto conv = [](Conv2dOptions o) {
    return [o](const std::vector<Tensor>& in) {
      return conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), o);
    };
  };
  EXPECT_TRUE(gradgradcheck(conv({.padding = 1}),
                            {leaf64({1, 2, 4, 4}, 11), leaf64({2, 2, 3, 3}, 12), leaf64({2}, 13)}));
  EXPECT_TRUE(gradgradcheck(conv({.stride = 2, .padding = 1, .dilation = {1, 2}, .groups = 2}),
                            {leaf64({2, 2, 5, 6}, 14), leaf64({2, 1, 3, 2}, 15)}));
  // An even kernel under "same": the extra row and column at the bottom and right.
  EXPECT_TRUE(gradgradcheck(conv({.padding = "same", .dilation = {1, 3}}),
                            {leaf64({1, 2, 4, 5}, 19), leaf64({2, 2, 2, 2}, 28)}));
}

TEST(Conv2d, SameKeepsTheSizeAndValidPadsNothing) {
  Tensor x = uniform({1, 2, 7, 6}, -1, 1, {.seed = 70});
  Tensor w = uniform({3, 2, 4, 3}, -1, 1, {.seed = 71});
  EXPECT_EQ(conv2d(x, w, Tensor(), {.padding = "same"}).shape(), (Shape{1, 3, 7, 6}));
  EXPECT_EQ(conv2d(x, w, Tensor(), {.padding = "same", .dilation = 2}).shape(),
            (Shape{1, 3, 7, 6}));
  EXPECT_TRUE(all_close(conv2d(x, w, Tensor(), {.padding = "valid"}), conv2d(x, w), 0, 0));
}

// The derivative ops are differentiable themselves (third derivatives of conv2d).
TEST(Conv2d, BackwardOpsGradcheckAndGradgradcheck) {
  const Conv2dOptions o{.stride = 2, .padding = 1, .groups = 2};
  const Shape xs{2, 4, 5, 5}, ws{4, 2, 3, 3};
  auto bi = [&](const std::vector<Tensor>& in) {
    return conv2d_backward_input(in[0], in[1], xs, o);
  };
  auto bw = [&](const std::vector<Tensor>& in) {
    return conv2d_backward_weight(in[0], in[1], ws, o);
  };
  const Shape ys{2, 4, 3, 3};
  EXPECT_TRUE(gradcheck(bi, {leaf64(ys, 20), leaf64(ws, 21)}));
  EXPECT_TRUE(gradcheck(bw, {leaf64(xs, 22), leaf64(ys, 23)}));
  EXPECT_TRUE(gradgradcheck(bi, {leaf64(ys, 24), leaf64(ws, 25)}));
  EXPECT_TRUE(gradgradcheck(bw, {leaf64(xs, 26), leaf64(ys, 27)}));
}

// <conv2d(x, w), g> = <x, backward_input(g, w)> = <w, backward_weight(x, g)>, including input
// sizes that the stride does not cover (the last rows and columns see no window).
TEST(Conv2d, BackwardOpsAreAdjointsOfConv2d) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Conv2dOptions o{.stride = 3, .padding = {1, 0}};
    const Shape xs{2, 8, 10, 9}, ws{8, 8, 2, 2};
    Tensor x = uniform(xs, -1, 1, {.dtype = dt, .seed = 50});
    Tensor w = uniform(ws, -1, 1, {.dtype = dt, .seed = 51});
    Tensor y = conv2d(x, w, Tensor(), o);
    Tensor g = uniform(y.shape(), -1, 1, {.dtype = dt, .seed = 52});
    const double lhs = sum(mul(y, g)).item<double>();
    const double tol = dt == DType::Float32 ? 1e-3 : 1e-9;
    EXPECT_NEAR(sum(mul(x, conv2d_backward_input(g, w, xs, o))).item<double>(), lhs,
                tol * std::abs(lhs));
    EXPECT_NEAR(sum(mul(w, conv2d_backward_weight(x, g, ws, o))).item<double>(), lhs,
                tol * std::abs(lhs));
  }
}

TEST(Conv2d, RepeatedCallsReuseCachedPrimitives) {
  Tensor x = uniform({2, 8, 7, 7}, -1, 1, {.seed = 60});
  Tensor w = uniform({8, 8, 3, 3}, -1, 1, {.seed = 61});
  auto step = [&] {
    Tensor xl = detach(x).set_requires_grad(true), wl = detach(w).set_requires_grad(true);
    auto g = grad({sum(conv2d(xl, wl, Tensor(), {.stride = {1, 2}, .padding = 1}))}, {xl, wl});
    return g[0];
  };
  step();
  const std::size_t after_first = detail::conv_primitive_cache_size();
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(detail::conv_primitive_cache_size(), after_first);
}

TEST(Conv2d, ErrorsNameTheOpAndShapes) {
  EXPECT_TRUE(throws_with(
      [] {
        conv2d(zeros({1, 3, 5, 5}), zeros({4, 2, 3, 3}));
      },
      {"conv2d", "[1, 3, 5, 5]", "[4, 2, 3, 3]"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d(zeros({1, 4, 5, 5}), zeros({3, 2, 3, 3}), Tensor(), {.groups = 2});
      },
      {"conv2d", "[1, 4, 5, 5]", "[3, 2, 3, 3]", "groups 2"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d(zeros({1, 3, 2, 2}), zeros({4, 3, 3, 3}));
      },
      {"conv2d", "[1, 3, 2, 2]", "[4, 3, 3, 3]", "larger"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), zeros({3}));
      },
      {"conv2d", "bias", "[3]"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d(zeros({3, 5, 5, 5, 5}), zeros({4, 3, 3, 3}));
      },
      {"conv2d", "[3, 5, 5, 5, 5]"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}, {.dtype = DType::Float64}));
      },
      {"conv2d", "float32", "float64"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d(zeros({1, 3, 5, 5}, {.dtype = DType::Int64}),
               zeros({4, 3, 3, 3}, {.dtype = DType::Int64}));
      },
      {"conv2d", "int64"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), Tensor(), {.stride = 0});
      },
      {"conv2d", "stride (0, 0)"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), Tensor(),
               {.stride = 2, .padding = "same"});
      },
      {"conv2d", "\"same\"", "stride 1", "(2, 2)"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), Tensor(), {.padding = "full"});
      },
      {"conv2d", "\"full\""}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d_backward_input(zeros({1, 4, 2, 2}), zeros({4, 3, 3, 3}), {1, 3, 5, 5});
      },
      {"conv2d_backward_input", "[1, 4, 2, 2]", "[4, 3, 3, 3]"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv2d_backward_weight(zeros({1, 3, 5, 5}), zeros({1, 4, 3, 2}), {4, 3, 3, 3});
      },
      {"conv2d_backward_weight", "[1, 4, 3, 2]", "[1, 3, 5, 5]"}));
}

}  // namespace
}  // namespace remat
