// sin, cos, log1p, expm1, silu, gelu (tanh), softplus, elu and masked_fill against PyTorch
// (tests/fixtures/gen_activations.py), first derivatives against PyTorch's, and first and
// second derivatives against float64 finite differences.
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::find_case;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

const std::vector<testing::FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("activations");
  return cases;
}

using Fn1 = std::function<Tensor(const Tensor&)>;
const std::vector<std::pair<std::string, Fn1>>& ops() {
  static const std::vector<std::pair<std::string, Fn1>> all = {
      {"sin", [](const Tensor& t) { return sin(t); }},
      {"cos", [](const Tensor& t) { return cos(t); }},
      {"silu", [](const Tensor& t) { return silu(t); }},
      {"expm1", [](const Tensor& t) { return expm1(t); }},
      {"gelu_tanh", [](const Tensor& t) { return gelu(t, "tanh"); }},
      {"softplus", [](const Tensor& t) { return softplus(t, 2.0, 1.0); }},
      {"elu", [](const Tensor& t) { return elu(t, 0.7); }},
  };
  return all;
}

TEST(Activations, ValuesAndDerivativesMatchPyTorch) {
  for (std::string tag : {"f32", "f64"}) {
    const auto& c = find_case(fixture(), "activations_" + tag);
    const double r = tag == "f32" ? 2e-5 : 1e-12;
    auto check = [&](const std::string& name, const Fn1& f, const Tensor& input) {
      Tensor x = clone(input).set_requires_grad(true);
      Tensor y = f(x);
      EXPECT_TRUE(all_close(y, c[name], r, r)) << name << " " << tag;
      EXPECT_TRUE(all_close(grad({sum(y)}, {x})[0], c[name + "_grad"], r, r))
          << name << " grad " << tag;
    };
    for (const auto& [name, f] : ops()) check(name, f, c["x"]);
    check(
        "log1p", [](const Tensor& t) { return log1p(t); }, c["xp"]);
    EXPECT_TRUE(all_close(masked_fill(c["x"], c["mask"], -7.5), c["masked_fill"], 0, 0)) << tag;
  }
  EXPECT_TRUE(testing::throws_with([] { gelu(zeros({2}), "fast"); }, {"gelu", "'fast'"}));
}

TEST(Activations, SecondDerivativesMatchFiniteDifferences) {
  // Points away from the kinks of softplus's threshold and elu's 0.
  for (const auto& [name, f] : ops()) {
    Tensor x = leaf64({2, 3}, 21, 0.1, 0.4);
    Tensor neg = leaf64({2, 3}, 22, -1.5, -0.6);
    for (const Tensor& at : {x, neg}) {
      auto fn = [&f = f](const std::vector<Tensor>& in) { return f(in[0]); };
      EXPECT_TRUE(gradcheck(fn, {at})) << name;
      EXPECT_TRUE(gradgradcheck(fn, {at})) << name;
    }
  }
  Tensor x = leaf64({4}, 23, 0.1, 2.0);
  auto fn = [](const std::vector<Tensor>& in) { return log1p(in[0]); };
  EXPECT_TRUE(gradcheck(fn, {x}));
  EXPECT_TRUE(gradgradcheck(fn, {x}));
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

TEST(ScanAndTriangles, MatchPyTorch) {
  const auto& c = testing::find_case(fixture(), "scan_and_triangles");
  const Tensor w = arange(1, 5, 1, {.dtype = DType::Float64});
  for (std::int64_t dim : {0, 1}) {
    Tensor x = clone(c["x"]).set_requires_grad(true);
    Tensor y = mul(cumsum(x, dim), w);
    EXPECT_TRUE(testing::all_close(y, c[fmt::format("cumsum{}", dim)], 1e-12, 1e-12)) << dim;
    EXPECT_TRUE(testing::all_close(grad({sum(y)}, {x})[0], c[fmt::format("cumsum{}_grad", dim)],
                                   1e-12, 1e-12));
    auto fn = [dim](const std::vector<Tensor>& in) { return cumsum(in[0], dim); };
    EXPECT_TRUE(testing::gradgradcheck(fn, {testing::leaf64({3, 4}, 31)})) << dim;
  }
  Tensor x = clone(c["x"]).set_requires_grad(true);
  Tensor l = logsumexp(x, 1);
  EXPECT_TRUE(testing::all_close(l, c["logsumexp"], 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(grad({sum(l)}, {x})[0], c["logsumexp_grad"], 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(logsumexp(c["ninf"], 1), c["logsumexp_ninf"], 0, 0));
  auto lse = [](const std::vector<Tensor>& in) { return logsumexp(in[0], 0, true); };
  EXPECT_TRUE(testing::gradgradcheck(lse, {testing::leaf64({3, 2}, 32)}));
  for (std::int64_t k : {0, 1, -1}) {
    EXPECT_TRUE(testing::all_close(triu(c["with_nan"], k), c[fmt::format("triu{}", k)], 0, 0)) << k;
    EXPECT_TRUE(testing::all_close(tril(c["with_nan"], k), c[fmt::format("tril{}", k)], 0, 0)) << k;
  }
  EXPECT_TRUE(testing::throws_with([] { triu(zeros({3})); }, {"triu", "at least 2 dims"}));
}

}  // namespace
}  // namespace remat
