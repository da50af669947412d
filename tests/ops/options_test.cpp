// Options PyTorch users expect, against PyTorch (tests/fixtures/gen_options.py): cross_entropy
// with probability targets, binary_cross_entropy_with_logits with weight and pos_weight, and
// embedding with padding_idx; values and gradients.
#include "nn/layers.h"
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

}  // namespace
}  // namespace remat
