// Options PyTorch users expect, against PyTorch (tests/fixtures/gen_options.py): cross_entropy
// with probability targets, binary_cross_entropy_with_logits with weight and pos_weight,
// embedding with padding_idx, vector norms of every order and topk; values and gradients
// (second derivatives of the smooth norms), and finite-difference checks.
#include <cmath>

#include "nn/layers.h"
#include "ops/sort.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::find_case;

const std::vector<testing::FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("options");
  return cases;
}

void check_loss(const std::function<Tensor(const Tensor&)>& loss_of, const Tensor& input,
                const Tensor& expected, const Tensor& expected_grad, const std::string& what) {
  Tensor x = clone(input).set_requires_grad(true);
  Tensor loss = loss_of(x);
  EXPECT_TRUE(all_close(loss, expected, 1e-12, 1e-12)) << what;
  EXPECT_TRUE(all_close(grad({sum(loss)}, {x})[0], expected_grad, 1e-12, 1e-12))
      << what << " gradient";
}

TEST(Options, CrossEntropyWithProbabilityTargets) {
  const auto& c = find_case(fixture(), "ce_probabilities");
  const Tensor &p = c["p"], &w = c["w"];
  const std::vector<std::pair<std::string, CrossEntropyOptions>> cases = {
      {"plain", {}},
      {"smooth", {.label_smoothing = 0.2}},
      {"weight", {.weight = w}},
      {"sum", {.reduction = Reduction::Sum}},
      {"none", {.reduction = Reduction::None}}};
  for (const auto& [tag, o] : cases)
    check_loss([&, o = o](const Tensor& x) { return cross_entropy(x, p, o); }, c["x"], c[tag],
               c[tag + "_grad"], tag);
  EXPECT_TRUE(testing::throws_with(
      [&] {
        cross_entropy(c["x"], zeros({4, 3}));  // float32 probabilities for float64 logits
      },
      {"cross_entropy", "probability targets", "float32"}));
}

TEST(Options, BinaryCrossEntropyWithWeightAndPosWeight) {
  const auto& c = find_case(fixture(), "bce_weights");
  const Tensor &t = c["t"], &bw = c["bw"], &pw = c["pw"];
  const std::vector<std::pair<std::string, BceWithLogitsOptions>> cases = {
      {"weight", {.weight = bw}},
      {"pos_weight", {.pos_weight = pw}},
      {"both", {.reduction = Reduction::Sum, .weight = bw, .pos_weight = pw}}};
  for (const auto& [tag, o] : cases)
    check_loss([&, o = o](const Tensor& z) { return binary_cross_entropy_with_logits(z, t, o); },
               c["z"], c[tag], c[tag + "_grad"], tag);
}

TEST(Options, EmbeddingPaddingIndexGetsNoGradient) {
  const auto& c = find_case(fixture(), "embedding_padding");
  Tensor table = clone(c["table"]).set_requires_grad(true);
  Tensor y = embedding(table, c["idx"], 2);
  EXPECT_TRUE(all_close(y, c["y"], 0, 0));
  Tensor w = reshape(arange(1, 13, 1, {.dtype = DType::Float64}), {2, 3, 2});
  EXPECT_TRUE(all_close(grad({sum(mul(y, w))}, {table})[0], c["grad"], 1e-12, 1e-12));
  // The module starts that row at zero.
  nn::Embedding emb(
      nn::EmbeddingOptions{.num_embeddings = 5, .embedding_dim = 2, .padding_idx = -1});
  EXPECT_TRUE(testing::bit_equal(select(emb.param("weight"), 0, 4), zeros({2})));
  EXPECT_TRUE(testing::throws_with([&] { embedding(table, c["idx"], 5); }, {"padding_idx 5"}));
}

TEST(Options, NormOfEveryOrderMatchesPyTorch) {
  int checked = 0;
  for (const auto& c : fixture()) {
    if (!c.name.starts_with("norm_")) continue;
    SCOPED_TRACE(c.name);
    Tensor x = clone(c["x"]).set_requires_grad(true);
    Tensor y = norm(x, c.num("p"), c.list("dims"));
    EXPECT_TRUE(all_close(y, c["y"], 1e-12, 1e-12));
    auto g = grad({sum(y)}, {x}, {}, true, true);
    EXPECT_TRUE(all_close(g[0], c["grad"], 1e-12, 1e-12));
    if (c.tensors.count("gradgrad")) {
      // Row 1 of x is zero: PyTorch's second derivative there is NaN, ours 0 (the norm has no
      // second derivative there; 0 continues the first derivative's choice of 0).
      Tensor gg = grad({sum(mul(g[0], c["v"]))}, {x})[0];
      Tensor expected = c["gradgrad"];
      EXPECT_TRUE(all_close(select(gg, 0, 0), select(expected, 0, 0), 1e-12, 1e-12));
      EXPECT_TRUE(all_close(narrow(gg, 0, 2, 2), narrow(expected, 0, 2, 2), 1e-12, 1e-12));
      EXPECT_TRUE(testing::bit_equal(select(gg, 0, 1), zeros({5}, {.dtype = DType::Float64})));
    }
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

TEST(Options, NormGradcheckAndGradgradcheck) {
  for (double p : std::vector<double>{1.0, 2.0, 3.0, 0.5, 1.5, INFINITY}) {
    SCOPED_TRACE(p);
    auto f = [p](const std::vector<Tensor>& in) { return norm(in[0], p, {0, 2}, true); };
    EXPECT_TRUE(testing::gradcheck(f, {testing::leaf64({3, 2, 4}, 80, 0.2, 1.0)}));
    if (!std::isinf(p) && p != 1.0) {
      EXPECT_TRUE(testing::gradgradcheck(f, {testing::leaf64({3, 2, 4}, 81, 0.2, 1.0)}));
    }
  }
  EXPECT_EQ(norm(zeros({2, 3})).item<float>(), 0.0f);
  EXPECT_EQ(norm(tensor<float>({3, -4}, Shape{2})).item<float>(), 5.0f);
  EXPECT_TRUE(testing::throws_with([] { norm(zeros({2}), -1); }, {"norm", "-1"}));
  EXPECT_TRUE(
      testing::throws_with([] { norm(zeros({2}, {.dtype = DType::Int64})); }, {"norm", "int64"}));
  EXPECT_TRUE(testing::throws_with([] { norm(zeros({0, 2}), INFINITY, {0}); }, {"norm", "empty"}));
}

TEST(Options, TopkMatchesPyTorch) {
  int checked = 0;
  for (const auto& c : fixture()) {
    if (!c.name.starts_with("topk_") || c.name == "topk_nan") continue;
    SCOPED_TRACE(c.name);
    Tensor x = clone(c["x"]).set_requires_grad(true);
    const auto dim = static_cast<std::int64_t>(c.num("dim"));
    auto [values, indices] = topk(x, 2, dim, c.num("largest") != 0);
    EXPECT_TRUE(all_close(values, c["values"], 0, 0));
    EXPECT_TRUE(testing::bit_equal(indices, c["indices"]));
    EXPECT_TRUE(all_close(grad({sum(mul(values, c["w"]))}, {x})[0], c["grad"], 0, 0));
    ++checked;
  }
  EXPECT_EQ(checked, 3);
  const auto& n = find_case(fixture(), "topk_nan");
  auto [values, indices] = topk(n["x"], 2);
  EXPECT_TRUE(all_close(values, n["values"], 0, 0));
  EXPECT_TRUE(testing::bit_equal(indices, n["indices"]));
}

TEST(Options, TopkTiesOrderAndDerivatives) {
  // Equal values come in index order; k = 0 and k = n work; int64 works.
  auto [v, i] = topk(tensor<std::int64_t>({3, 1, 3, 2, 3}, Shape{5}), 3);
  EXPECT_TRUE(testing::bit_equal(i, tensor<std::int64_t>({0, 2, 4}, Shape{3})));
  EXPECT_TRUE(testing::bit_equal(v, tensor<std::int64_t>({3, 3, 3}, Shape{3})));
  EXPECT_EQ(topk(zeros({2, 4}), 0).first.shape(), (Shape{2, 0}));
  EXPECT_EQ(topk(zeros({2, 4}), 4, 1, false).second.shape(), (Shape{2, 4}));
  // Values are a gather: first and second derivatives through them.
  auto f = [](const std::vector<Tensor>& in) {
    Tensor t = topk(in[0], 2, 1).first;
    return mul(t, t);
  };
  EXPECT_TRUE(testing::gradcheck(f, {testing::leaf64({3, 5}, 90)}));
  EXPECT_TRUE(testing::gradgradcheck(f, {testing::leaf64({3, 5}, 91)}));
  EXPECT_TRUE(testing::throws_with([] { topk(zeros({2, 3}), 4); }, {"topk", "k (4)", "[2, 3]"}));
  EXPECT_TRUE(testing::throws_with([] { topk(zeros({2, 3}), 1, 2); }, {"topk"}));
}

}  // namespace
}  // namespace remat
