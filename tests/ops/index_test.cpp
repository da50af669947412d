// Indexing ops (ops/index.h) against PyTorch: gather, scatter_add, index_select, index_add,
// one_hot and embedding; gradients, determinism at repeated indices, and range errors.
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
  static const auto cases = testing::load_fixture("index");
  return cases;
}

Tensor ints(const std::vector<std::int64_t>& v, std::optional<Shape> shape = std::nullopt) {
  return tensor<std::int64_t>(v, std::move(shape));
}

class IndexValues : public ::testing::TestWithParam<std::string> {};

TEST_P(IndexValues, GatherAndScatterAddMatchPyTorch) {
  const auto& c = find_case(fixture(), "gather_scatter_" + GetParam());
  const Tensor &x = c["x"], &idx1 = c["idx1"], &idx0 = c["idx0"], &base = c["base"],
               &src = c["src"];
  EXPECT_TRUE(bit_equal(gather(x, 1, idx1), c["gather_1"]));
  EXPECT_TRUE(bit_equal(gather(x, -2, idx0), c["gather_0"]));
  // Strided data and a strided index.
  EXPECT_TRUE(bit_equal(gather(transpose(x, 0, 1), 0, slice(transpose(idx0, 0, 1), 0, 0, 3)),
                        c["gather_transposed"]));
  // idx1 repeats column 4 in its first row: both contributions add up.  src is a strided slice.
  EXPECT_TRUE(all_close(scatter_add(base, 1, idx1, slice(src, 1, 0, 3)), c["scatter_add_1"]));
  EXPECT_TRUE(all_close(scatter_add(base, 1, idx1, src), c["scatter_add_big_src"]));
  EXPECT_TRUE(
      all_close(scatter_add(base, 0, slice(idx0, 1, 0, 4), slice(slice(src, 0, 0, 2), 1, 0, 4)),
                c["scatter_add_0"]));
}

TEST_P(IndexValues, IndexSelectAndIndexAddMatchPyTorch) {
  const auto& c = find_case(fixture(), "index_select_" + GetParam());
  const Tensor &y = c["y"], &sel = c["sel"];
  EXPECT_TRUE(bit_equal(index_select(y, 0, sel), c["select_0"]));
  EXPECT_TRUE(bit_equal(index_select(y, 1, c["sel2"]), c["select_1"]));
  EXPECT_TRUE(bit_equal(index_select(y, -1, ints({1})), c["select_m1"]));
  EXPECT_TRUE(bit_equal(index_select(transpose(y, 0, 2), 2, sel), c["select_transposed"]));
  EXPECT_TRUE(all_close(index_add(c["add_base"], 0, sel, c["add_src"]), c["index_add_0"]));
  // A strided src goes through the same path.
  EXPECT_TRUE(all_close(
      index_add(c["add_base"], 0, sel, transpose(contiguous(transpose(c["add_src"], 0, 1)), 0, 1)),
      c["index_add_0"]));
}

TEST_P(IndexValues, IndexSelectGradientAccumulatesRepeatedRowsAsPyTorch) {
  const auto& c = find_case(fixture(), "index_select_" + GetParam());
  Tensor y = detach(c["y"]).set_requires_grad(true);
  backward({index_select(y, 0, c["sel"])}, {c["select_0_grad_out"]});
  EXPECT_TRUE(all_close(y.grad(), c["select_0_grad"]));
}

TEST_P(IndexValues, EmbeddingMatchesPyTorch) {
  const auto& c = find_case(fixture(), "embedding_" + GetParam());
  const Tensor &weight = c["weight"], &ids = c["ids"];
  Tensor out = embedding(weight, ids);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 3}));
  EXPECT_TRUE(bit_equal(out, c["out"]));
  EXPECT_TRUE(bit_equal(embedding(weight, select(ids, 0, 0)), c["out_1d"]));
  EXPECT_TRUE(
      bit_equal(embedding(transpose(contiguous(transpose(weight, 0, 1)), 0, 1), ids), c["out"]));
  Tensor w = detach(weight).set_requires_grad(true);
  backward({embedding(w, ids)}, {c["grad_out"]});
  EXPECT_TRUE(all_close(w.grad(), c["grad_weight"]));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, IndexValues, ::testing::Values("f32", "f64"));

TEST(IndexOps, OneHotMatchesPyTorch) {
  const auto& c = find_case(fixture(), "one_hot");
  const Tensor& labels = c["labels"];
  Tensor d = one_hot(labels);
  EXPECT_EQ(d.dtype(), DType::Int64);
  EXPECT_TRUE(bit_equal(d, c["default"]));
  EXPECT_TRUE(bit_equal(one_hot(labels, 6), c["six"]));
  Tensor f = one_hot(labels, 5, DType::Float32);
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_TRUE(bit_equal(f, c["float"]));
  EXPECT_TRUE(bit_equal(one_hot(transpose(labels, 0, 1), 5), transpose(c["default"], 0, 1)));
}

TEST(IndexOps, EmbeddingBackwardIsDeterministicWithRepeatedIndices) {
  // Many float32 contributions to few rows: any change of summation order would change bits.
  Tensor w = uniform({4, 16}, -1, 1, {.seed = 5});
  Tensor ids = randint(0, 4, {64, 9}, {.seed = 6});
  Tensor g = uniform({64, 9, 16}, -1, 1, {.seed = 7});
  auto run = [&] {
    Tensor leaf = detach(w).set_requires_grad(true);
    backward({embedding(leaf, ids)}, {g});
    return leaf.grad();
  };
  Tensor first = run();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bit_equal(run(), first));
  // And the sums are right: compare with a float64 computation.
  Tensor leaf = detach(to_dtype(w, DType::Float64)).set_requires_grad(true);
  backward({embedding(leaf, ids)}, {to_dtype(g, DType::Float64)});
  EXPECT_TRUE(all_close(first, to_dtype(leaf.grad(), DType::Float32), 1e-5, 1e-5));
}

struct GradCase {
  std::string name;
  std::vector<Shape> shapes;
  testing::Fn fn;
};

std::vector<GradCase> grad_cases() {
  const Tensor idx1 = ints({0, 4, 4, 2, 2, 1, 3, 0, 1}, Shape{3, 3});
  const Tensor sel = ints({3, 0, 3, 1});
  return {
      {"gather", {{3, 5}}, [=](const auto& in) { return gather(in[0], 1, idx1); }},
      {"gather_transposed",
       {{5, 3}},
       [=](const auto& in) { return gather(transpose(in[0], 0, 1), 1, idx1); }},
      {"scatter_add",
       {{3, 5}, {3, 3}},
       [=](const auto& in) { return scatter_add(in[0], 1, idx1, in[1]); }},
      {"scatter_add_big_src",
       {{3, 5}, {4, 6}},
       [=](const auto& in) { return scatter_add(in[0], 1, idx1, in[1]); }},
      {"index_select", {{4, 3, 2}}, [=](const auto& in) { return index_select(in[0], 0, sel); }},
      {"index_select_dim1",
       {{2, 4, 3}},
       [=](const auto& in) { return index_select(in[0], 1, sel); }},
      {"index_select_strided",
       {{3, 4}},
       [=](const auto& in) { return index_select(transpose(in[0], 0, 1), 0, sel); }},
      {"index_add",
       {{5, 2}, {4, 2}},
       [=](const auto& in) { return index_add(in[0], 0, sel, in[1]); }},
      {"index_add_dim1",
       {{2, 5}, {2, 4}},
       [=](const auto& in) { return index_add(in[0], 1, sel, in[1]); }},
      {"embedding",
       {{5, 3}},
       [=](const auto& in) {
         return embedding(in[0], ints({4, 0, 4, 2, 4, 1}, Shape{2, 3}));
       }},
  };
}

TEST(IndexOps, GradientsMatchFiniteDifferences) {
  std::uint64_t seed = 300;
  for (const auto& gc : grad_cases()) {
    std::vector<Tensor> inputs;
    for (const auto& s : gc.shapes) inputs.push_back(leaf64(s, ++seed));
    EXPECT_TRUE(gradcheck(gc.fn, inputs)) << gc.name;
    EXPECT_TRUE(gradgradcheck(
        [&](const std::vector<Tensor>& in) {
          Tensor y = gc.fn(in);
          return mul(y, y);
        },
        inputs))
        << gc.name;
  }
}

TEST(IndexOps, OneHotIsNotDifferentiable) {
  Tensor h = one_hot(ints({1, 0}), 3, DType::Float64);
  EXPECT_FALSE(h.requires_grad());
}

TEST(IndexOps, OutOfRangeIndicesNameTheOpAndValue) {
  Tensor x = zeros({3, 5});
  EXPECT_TRUE(throws_with(
      [&] {
        gather(x, 1, ints({0, 5}, Shape{1, 2}));
      },
      {"gather", "index 5", "size 5"}));
  EXPECT_TRUE(throws_with([&] { gather(x, 0, ints({-1}, Shape{1, 1})); }, {"gather", "index -1"}));
  EXPECT_TRUE(throws_with(
      [&] {
        scatter_add(x, 1, ints({7}, Shape{1, 1}), ones({1, 1}));
      },
      {"scatter_add", "index 7"}));
  EXPECT_TRUE(throws_with(
      [&] {
        index_select(x, 0, ints({0, 3}));
      },
      {"index_select", "index 3", "size 3"}));
  EXPECT_TRUE(throws_with([&] { index_select(x, 1, ints({-1})); }, {"index_select", "index -1"}));
  EXPECT_TRUE(throws_with(
      [&] {
        index_add(x, 0, ints({9}), ones({1, 5}));
      },
      {"index_add", "index 9"}));
  EXPECT_TRUE(throws_with(
      [&] {
        embedding(x, ints({1, 3, 2}));
      },
      {"embedding", "index 3", "size 3"}));
  EXPECT_TRUE(throws_with([&] { one_hot(ints({1, 5}), 5); }, {"one_hot", "label 5", "5 classes"}));
  EXPECT_TRUE(throws_with([&] { one_hot(ints({1, -2}), 4); }, {"one_hot", "label -2"}));
  EXPECT_TRUE(throws_with([&] { one_hot(ints({1, -2})); }, {"one_hot", "label -2"}));
}

TEST(IndexOps, BadShapesAndDtypesNameTheOpAndShapes) {
  Tensor x = zeros({3, 5});
  EXPECT_TRUE(throws_with([&] { gather(x, 1, zeros({3, 1})); }, {"gather", "int64", "[3, 1]"}));
  EXPECT_TRUE(throws_with([&] { gather(x, 1, ints({0, 1})); }, {"gather", "[2]", "[3, 5]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        gather(x, 1, ints({0, 0, 0, 0}, Shape{4, 1}));
      },
      {"gather", "[4, 1]", "[3, 5]"}));
  EXPECT_TRUE(throws_with([&] { gather(x, 2, ints({0}, Shape{1, 1})); }, {"gather", "dim 2"}));
  EXPECT_TRUE(throws_with(
      [&] {
        scatter_add(x, 1, ints({0}, Shape{1, 1}), zeros({1, 1}, {.dtype = DType::Float64}));
      },
      {"scatter_add", "float64", "float32"}));
  EXPECT_TRUE(throws_with(
      [&] {
        index_select(x, 0, ints({0, 1}, Shape{1, 2}));
      },
      {"index_select", "1-D", "[1, 2]"}));
  EXPECT_TRUE(
      throws_with([&] { index_select(x, 0, zeros({2})); }, {"index_select", "int64", "float32"}));
  EXPECT_TRUE(throws_with([&] { index_select(scalar_tensor(1.0), 0, ints({0})); },
                          {"index_select", "0-dim"}));
  EXPECT_TRUE(throws_with(
      [&] {
        index_add(x, 0, ints({0, 1}), ones({2, 4}));
      },
      {"index_add", "[2, 4]", "[3, 5]"}));
  EXPECT_TRUE(throws_with([&] { embedding(zeros({5}), ints({1})); }, {"embedding", "2-D", "[5]"}));
  EXPECT_TRUE(throws_with([&] { embedding(x, zeros({2})); }, {"embedding", "int64", "[2]"}));
  EXPECT_TRUE(throws_with([&] { one_hot(zeros({2})); }, {"one_hot", "int64", "[2]"}));
  EXPECT_TRUE(throws_with([&] { one_hot(ints({})); }, {"one_hot", "empty"}));
}

}  // namespace
}  // namespace remat
