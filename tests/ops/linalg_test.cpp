// matmul and linear (ops/linalg.h) against PyTorch: 1-D, 2-D and broadcast batched operands,
// strided operands (transposed views passed to GEMM without copies, slices, expanded rows),
// linear with and without bias, float32 gradients, float64 gradient checks of first and second
// order, and errors that name the op and the shapes.
#include "ops/linalg.h"

#include <functional>

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
  static const auto cases = testing::load_fixture("linalg");
  return cases;
}

// t (2-D) as the left columns of a wider matrix whose other columns hold garbage.
Tensor embed_in_wider(const Tensor& t, std::int64_t extra) {
  const std::int64_t rows = t.size(0), cols = t.size(1);
  const auto v = t.to_vector<double>();
  std::vector<double> w(rows * (cols + extra), 1e30);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) w[i * (cols + extra) + j] = v[i * cols + j];
  return slice(to_dtype(tensor<double>(w, Shape{rows, cols + extra}), t.dtype()), 1, 0, cols);
}

bool is_f32(const std::string& name) {
  return name.ends_with("_f32");
}
double rtol_for(const std::string& name) {
  return is_f32(name) ? 1e-5 : 1e-12;
}
double atol_for(const std::string& name) {
  return is_f32(name) ? 1e-5 : 1e-12;
}

TEST(Matmul, MatchesPyTorchForEveryShapeCase) {
  int checked = 0;
  for (const auto& c : fixture()) {
    if (!c.name.starts_with("matmul_") || c.name == "matmul_grad") continue;
    SCOPED_TRACE(c.name);
    Tensor out = matmul(c["a"], c["b"]);
    EXPECT_EQ(out.dtype(), c["out"].dtype());
    EXPECT_TRUE(all_close(out, c["out"], rtol_for(c.name), atol_for(c.name)));
    ++checked;
  }
  EXPECT_EQ(checked, 22);
}

TEST(Matmul, DotProductIsZeroDim) {
  const auto& c = find_case(fixture(), "matmul_dot_f64");
  Tensor out = matmul(c["a"], c["b"]);
  EXPECT_EQ(out.dim(), 0);
  EXPECT_NEAR(out.item<double>(), c["out"].item<double>(), 1e-12);
}

// Transposed views go to GEMM as transpose flags, slices as leading dimensions, and expanded
// (stride 0) rows through a copy; all must give the same values.
TEST(Matmul, StridedOperandsMatchPyTorch) {
  for (std::string tag : {"f32", "f64"}) {
    SCOPED_TRACE(tag);
    const auto& c = find_case(fixture(), "matmul_mm_" + tag);
    const Tensor &a = c["a"], &b = c["b"], &expected = c["out"];
    const double rtol = rtol_for(c.name), atol = atol_for(c.name);
    Tensor at = transpose(contiguous(transpose(a, 0, 1)), 0, 1);  // column-major a
    Tensor bt = transpose(contiguous(transpose(b, 0, 1)), 0, 1);
    ASSERT_FALSE(at.is_contiguous());
    EXPECT_TRUE(all_close(matmul(at, b), expected, rtol, atol));
    EXPECT_TRUE(all_close(matmul(a, bt), expected, rtol, atol));
    EXPECT_TRUE(all_close(matmul(at, bt), expected, rtol, atol));
    // a as the left columns of a wider matrix (row stride 7 for 4 columns), at an offset.
    Tensor a_in_wide = embed_in_wider(a, 3);
    ASSERT_EQ(a_in_wide.stride(0), 7);
    EXPECT_TRUE(all_close(matmul(a_in_wide, b), expected, rtol, atol));
    EXPECT_TRUE(all_close(matmul(slice(embed_in_wider(a, 3), 0, 1, 3), b), slice(expected, 0, 1, 3),
                          rtol, atol));
    // Broadcast rows: every row of the result is the product of row 0 of a.
    Tensor row0 = expand(slice(a, 0, 0, 1), {3, 4});
    Tensor r = matmul(row0, b);
    for (std::int64_t i = 0; i < 3; ++i)
      EXPECT_TRUE(all_close(select(r, 0, i), select(expected, 0, 0), rtol, atol));
  }
}

TEST(Matmul, BatchedTransposedAndPermutedOperandsMatchPyTorch) {
  const auto& c = find_case(fixture(), "matmul_broadcast_f64");  // [2, 1, 3, 4] @ [5, 4, 2]
  const Tensor &a = c["a"], &b = c["b"];
  Tensor bt = transpose(contiguous(transpose(b, 1, 2)), 1, 2);  // each matrix column-major
  EXPECT_TRUE(all_close(matmul(a, bt), c["out"], 1e-12, 1e-12));
  // Batch dims stored in a different order than they are indexed.
  Tensor bp = permute(contiguous(permute(b, {1, 2, 0})), {2, 0, 1});
  ASSERT_FALSE(bp.is_contiguous());
  EXPECT_TRUE(all_close(matmul(a, bp), c["out"], 1e-12, 1e-12));
}

TEST(Matmul, LargerFloat32ProductMatchesFloat64) {
  Tensor a = uniform({3, 70, 130}, -1, 1, {.dtype = DType::Float64, .seed = 3});
  Tensor b = uniform({130, 90}, -1, 1, {.dtype = DType::Float64, .seed = 4});
  Tensor expected = matmul(a, b);
  Tensor got = matmul(to_dtype(a, DType::Float32), to_dtype(b, DType::Float32));
  EXPECT_TRUE(all_close(got, expected, 1e-4, 1e-4));
  Tensor bb = uniform({3, 130, 20}, -1, 1, {.dtype = DType::Float64, .seed = 5});
  EXPECT_TRUE(all_close(matmul(to_dtype(a, DType::Float32), to_dtype(bb, DType::Float32)),
                        matmul(a, bb), 1e-4, 1e-4));
}

TEST(Matmul, EmptyDimensions) {
  Tensor e = matmul(zeros({0, 3}), ones({3, 4}));
  EXPECT_EQ(e.shape(), (Shape{0, 4}));
  // An empty inner dim sums nothing: zeros, even where the output buffer held garbage.
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor z = matmul(ones({2, 0}, {.dtype = dt}), ones({0, 3}, {.dtype = dt}));
    EXPECT_TRUE(all_close(z, zeros({2, 3}, {.dtype = dt}), 0, 0));
    Tensor zb = matmul(ones({2, 3, 0}, {.dtype = dt}), ones({0, 4}, {.dtype = dt}));
    EXPECT_TRUE(all_close(zb, zeros({2, 3, 4}, {.dtype = dt}), 0, 0));
    Tensor zl = linear(ones({2, 3, 0}, {.dtype = dt}), ones({4, 0}, {.dtype = dt}), ones({4}, {.dtype = dt}));
    EXPECT_TRUE(all_close(zl, ones({2, 3, 4}, {.dtype = dt}), 0, 0));
  }
}

TEST(Linear, MatchesPyTorchWithAndWithoutBias) {
  for (std::string tag : {"f32", "f64"}) {
    SCOPED_TRACE(tag);
    const double rtol = tag == "f32" ? 1e-5 : 1e-12;
    const auto& with_bias = find_case(fixture(), "linear_bias_" + tag);
    EXPECT_TRUE(all_close(linear(with_bias["x"], with_bias["w"], with_bias["b"]), with_bias["out"],
                          rtol, rtol));
    const auto& no_bias = find_case(fixture(), "linear_nobias_" + tag);
    EXPECT_TRUE(all_close(linear(no_bias["x"], no_bias["w"]), no_bias["out"], rtol, rtol));
    const auto& vec = find_case(fixture(), "linear_vec_" + tag);
    EXPECT_TRUE(all_close(linear(vec["x"], vec["w"], vec["b"]), vec["out"], rtol, rtol));
    // A weight that is a transposed view (as after transpose(w_t)) is read in place.
    Tensor wt = transpose(contiguous(transpose(with_bias["w"], 0, 1)), 0, 1);
    EXPECT_TRUE(
        all_close(linear(with_bias["x"], wt, with_bias["b"]), with_bias["out"], rtol, rtol));
  }
}

TEST(Matmul, Float32GradientsMatchPyTorch) {
  const auto& c = find_case(fixture(), "matmul_grad");
  Tensor a = detach(c["a"]).set_requires_grad(true), b = detach(c["b"]).set_requires_grad(true);
  auto g = grad({sum(mul(matmul(a, b), c["gw"]))}, {a, b});
  EXPECT_TRUE(all_close(g[0], c["ga"], 1e-5, 1e-5));
  EXPECT_TRUE(all_close(g[1], c["gb"], 1e-5, 1e-5));
}

TEST(Linear, Float32GradientsMatchPyTorch) {
  const auto& c = find_case(fixture(), "linear_grad");
  Tensor x = detach(c["x"]).set_requires_grad(true), w = detach(c["w"]).set_requires_grad(true),
         b = detach(c["b"]).set_requires_grad(true);
  auto g = grad({sum(mul(linear(x, w, b), c["gw"]))}, {x, w, b});
  EXPECT_TRUE(all_close(g[0], c["gx"], 1e-5, 1e-5));
  EXPECT_TRUE(all_close(g[1], c["gweight"], 1e-5, 1e-5));
  EXPECT_TRUE(all_close(g[2], c["gb"], 1e-5, 1e-5));
}

TEST(Matmul, GradcheckAllShapeCases) {
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {4, 2}},          {{4}, {4}},          {{4}, {4, 3}},       {{3, 4}, {4}},
      {{2, 1, 3, 4}, {3, 4, 2}}, {{2, 3, 4}, {4, 2}}, {{3, 4}, {2, 4, 2}}, {{4}, {2, 4, 3}},
      {{2, 3, 4}, {4}}};
  std::uint64_t seed = 10;
  for (const auto& [sa, sb] : shapes) {
    SCOPED_TRACE(fmt::format("{} @ {}", sa, sb));
    EXPECT_TRUE(gradcheck(mm, {leaf64(sa, seed), leaf64(sb, seed + 1)}));
    seed += 2;
  }
}

TEST(Matmul, GradgradcheckBroadcastAndVector) {
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  EXPECT_TRUE(gradgradcheck(mm, {leaf64({2, 1, 3, 4}, 30), leaf64({3, 4, 2}, 31)}));
  EXPECT_TRUE(gradgradcheck(mm, {leaf64({4}, 32), leaf64({2, 4, 3}, 33)}));
  // A transposed operand: gradients flow back through the view.
  auto mmt = [](const std::vector<Tensor>& in) { return matmul(transpose(in[0], 0, 1), in[1]); };
  EXPECT_TRUE(gradgradcheck(mmt, {leaf64({4, 3}, 34), leaf64({4, 2}, 35)}));
}

TEST(Linear, GradcheckAndGradgradcheck) {
  auto with_bias = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
  auto no_bias = [](const std::vector<Tensor>& in) { return linear(in[0], in[1]); };
  EXPECT_TRUE(gradcheck(with_bias, {leaf64({2, 3, 4}, 40), leaf64({5, 4}, 41), leaf64({5}, 42)}));
  EXPECT_TRUE(gradcheck(no_bias, {leaf64({3, 4}, 43), leaf64({5, 4}, 44)}));
  EXPECT_TRUE(gradcheck(with_bias, {leaf64({4}, 45), leaf64({2, 4}, 46), leaf64({2}, 47)}));
  EXPECT_TRUE(
      gradgradcheck(with_bias, {leaf64({2, 3, 4}, 48), leaf64({5, 4}, 49), leaf64({5}, 50)}));
  EXPECT_TRUE(gradgradcheck(no_bias, {leaf64({3, 4}, 51), leaf64({5, 4}, 52)}));
}

TEST(Matmul, ErrorsNameTheOpAndShapes) {
  EXPECT_TRUE(throws_with(
      [] {
        matmul(zeros({2, 3}), zeros({4, 5}));
      },
      {"matmul", "[2, 3]", "[4, 5]"}));
  EXPECT_TRUE(throws_with([] { matmul(zeros({3}), zeros({4})); }, {"matmul", "[3]", "[4]"}));
  EXPECT_TRUE(throws_with(
      [] {
        matmul(zeros({2, 2, 3}), zeros({3, 3, 4}));
      },
      {"matmul", "[2, 2, 3]", "[3, 3, 4]", "broadcast"}));
  EXPECT_TRUE(throws_with(
      [] {
        matmul(zeros({2, 3}), zeros({3, 4}, {.dtype = DType::Float64}));
      },
      {"matmul", "dtype", "[2, 3]", "[3, 4]"}));
  EXPECT_TRUE(throws_with(
      [] {
        matmul(zeros({2, 3}, {.dtype = DType::Int64}), zeros({3, 4}, {.dtype = DType::Int64}));
      },
      {"matmul", "int64", "not supported"}));
  EXPECT_TRUE(throws_with([] { matmul(zeros({}), zeros({3})); }, {"matmul", "[]", "[3]"}));
}

TEST(Linear, ErrorsNameTheOpAndShapes) {
  EXPECT_TRUE(throws_with(
      [] {
        linear(zeros({2, 3}), zeros({5, 4}));
      },
      {"linear", "[2, 3]", "[5, 4]"}));
  EXPECT_TRUE(throws_with(
      [] {
        linear(zeros({2, 4}), zeros({5, 4}), zeros({4}));
      },
      {"linear", "bias", "[4]", "[5, 4]"}));
  EXPECT_TRUE(throws_with([] { linear(zeros({2, 4}), zeros({4})); }, {"linear", "weight", "[4]"}));
  EXPECT_TRUE(throws_with(
      [] {
        linear(zeros({2, 4}), zeros({5, 4}, {.dtype = DType::Float64}));
      },
      {"linear", "dtype"}));
}

}  // namespace
}  // namespace remat
