// Element-wise ops against PyTorch (tests/fixtures/gen_elementwise.py), gradients against float64
// finite differences, and error messages.
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

const std::vector<testing::FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("elementwise");
  return cases;
}

double tol(DType t) {
  return t == DType::Float32 ? 1e-5 : 1e-12;
}

TEST(Elementwise, UnaryMatchesPyTorch) {
  for (std::string tag : {"f32", "f64"}) {
    const auto& c = testing::find_case(fixture(), "unary_" + tag);
    const Tensor &x = c["x"], &pos = c["pos"];
    const double r = tol(x.dtype());
    EXPECT_TRUE(all_close(neg(x), c["neg"], r, r)) << tag;
    EXPECT_TRUE(all_close(exp(x), c["exp"], r, r)) << tag;
    EXPECT_TRUE(all_close(log(pos), c["log"], r, r)) << tag;
    EXPECT_TRUE(all_close(sqrt(pos), c["sqrt"], r, r)) << tag;
    EXPECT_TRUE(all_close(rsqrt(pos), c["rsqrt"], r, r)) << tag;
    EXPECT_TRUE(all_close(abs(x), c["abs"], r, r)) << tag;
    EXPECT_TRUE(all_close(tanh(x), c["tanh"], r, r)) << tag;
    EXPECT_TRUE(all_close(sigmoid(x), c["sigmoid"], r, r)) << tag;
    EXPECT_TRUE(all_close(relu(x), c["relu"], r, r)) << tag;
    EXPECT_TRUE(all_close(leaky_relu(x, 0.1), c["leaky_relu"], r, r)) << tag;
    EXPECT_TRUE(all_close(gelu(x), c["gelu"], r, r)) << tag;
    EXPECT_TRUE(all_close(erf(x), c["erf"], r, r)) << tag;
    EXPECT_TRUE(all_close(clamp(x, -0.5, 0.7), c["clamp"], r, r)) << tag;
    EXPECT_TRUE(all_close(clamp(x, 0.2, std::nullopt), c["clamp_min"], r, r)) << tag;
    EXPECT_TRUE(all_close(pow(pos, 2.5), c["pow_scalar"], r, r)) << tag;
    EXPECT_TRUE(all_close(sign(x), c["sign"], 0, 0)) << tag;
  }
}

TEST(Elementwise, BinaryBroadcastsLikePyTorch) {
  for (std::string tag : {"f32", "f64"}) {
    const auto& c = testing::find_case(fixture(), "binary_" + tag);
    const Tensor &a = c["a"], &b = c["b"], &apos = c["apos"], &bpos = c["bpos"];
    const double r = tol(a.dtype());
    EXPECT_TRUE(all_close(a + b, c["add"], r, r)) << tag;
    EXPECT_TRUE(all_close(a - b, c["sub"], r, r)) << tag;
    EXPECT_TRUE(all_close(a * b, c["mul"], r, r)) << tag;
    EXPECT_TRUE(all_close(a / bpos, c["div"], r, r)) << tag;
    EXPECT_TRUE(all_close(pow(apos, b), c["pow"], r, r)) << tag;
    EXPECT_TRUE(all_close(maximum(a, b), c["maximum"], r, r)) << tag;
    EXPECT_TRUE(all_close(minimum(a, b), c["minimum"], r, r)) << tag;
    EXPECT_TRUE(all_close(a + 1.5, c["add_scalar"], r, r)) << tag;
    EXPECT_TRUE(all_close(2.0 - a, c["rsub_scalar"], r, r)) << tag;
    EXPECT_TRUE(all_close(3.0 / bpos, c["rdiv_scalar"], r, r)) << tag;
  }
}

TEST(Elementwise, ComparisonsAndWhere) {
  for (std::string tag : {"f32", "f64"}) {
    const auto& c = testing::find_case(fixture(), "compare_" + tag);
    const Tensor &a = c["a"], &b = c["b"];
    EXPECT_TRUE(all_close(eq(a, b), c["eq"], 0, 0));
    EXPECT_TRUE(all_close(ne(a, b), c["ne"], 0, 0));
    EXPECT_TRUE(all_close(lt(a, b), c["lt"], 0, 0));
    EXPECT_TRUE(all_close(le(a, b), c["le"], 0, 0));
    EXPECT_TRUE(all_close(gt(a, b), c["gt"], 0, 0));
    EXPECT_TRUE(all_close(ge(a, b), c["ge"], 0, 0));
    EXPECT_TRUE(all_close(where(gt(a, b), a, mul(a, -10.0)), c["where"], 0, 0));
  }
}

TEST(Elementwise, Int64Arithmetic) {
  const auto& c = testing::find_case(fixture(), "int64");
  EXPECT_TRUE(all_close(c["a"] + c["b"], c["add"], 0, 0));
  EXPECT_TRUE(all_close(c["a"] * 2.0, c["mul"], 0, 0));
  EXPECT_TRUE(all_close(abs(c["a"]), c["abs"], 0, 0));
  EXPECT_TRUE(all_close(relu(c["a"]), c["relu"], 0, 0));
  EXPECT_TRUE(all_close(to_dtype(c["a"], DType::Float32), c["to_float"], 0, 0));
}

TEST(Elementwise, NonContiguousInputs) {
  Tensor a = leaf64({3, 4}, 1);
  Tensor t = transpose(a, 0, 1);  // strided view
  Tensor expected = tensor<double>(contiguous(t).to_vector<double>(), Shape{4, 3});
  EXPECT_TRUE(all_close(exp(t), exp(expected), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(t + expected, mul(expected, 2.0), 1e-12, 1e-12));
}

struct UnaryCase {
  const char* name;
  Tensor (*fn)(const Tensor&);
  double lo, hi;
};

TEST(Elementwise, UnaryGradientsAndSecondDerivatives) {
  const UnaryCase cases[] = {
      {"neg", [](const Tensor& x) { return neg(x); }, -2, 2},
      {"exp", [](const Tensor& x) { return exp(x); }, -2, 2},
      {"log", [](const Tensor& x) { return log(x); }, 0.5, 2},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0.5, 2},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.5, 2},
      {"abs", [](const Tensor& x) { return abs(x); }, 0.1, 2},
      {"tanh", [](const Tensor& x) { return tanh(x); }, -2, 2},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -2, 2},
      {"relu", [](const Tensor& x) { return relu(x); }, 0.1, 2},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }, -2, -0.1},
      {"gelu", [](const Tensor& x) { return gelu(x); }, -2, 2},
      {"erf", [](const Tensor& x) { return erf(x); }, -2, 2},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.5); }, -0.4, 0.4},
      {"pow", [](const Tensor& x) { return pow(x, 3.0); }, -2, 2},
  };
  for (const auto& c : cases) {
    Tensor x = leaf64({2, 3}, 3, c.lo, c.hi);
    auto fn = [&](const std::vector<Tensor>& in) { return c.fn(in[0]); };
    EXPECT_TRUE(gradcheck(fn, {x})) << c.name;
    EXPECT_TRUE(gradgradcheck(fn, {x})) << c.name;
  }
}

TEST(Elementwise, ReluBackwardMasksByTheOutput) {
  Tensor x = tensor<double>({-1.5, -0.2, 0.0, 0.3, 2.0}).set_requires_grad(true);
  Tensor g = tensor<double>({1, 2, 3, 4, 5});
  Tensor y = relu(x);
  EXPECT_EQ(relu_backward(g, y).to_vector<double>(), (std::vector<double>{0, 0, 0, 4, 5}));
  backward({y}, {g});
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, 4, 5}));
  // Mixed signs away from the kink: first and second derivatives through relu_backward.
  Tensor z = tensor<double>({-1.5, -0.2, 0.3, 2.0, -0.7, 1.1}, Shape{2, 3}).set_requires_grad(true);
  auto fn = [](const std::vector<Tensor>& in) { return relu(in[0]); };
  EXPECT_TRUE(gradcheck(fn, {z}));
  EXPECT_TRUE(gradgradcheck(fn, {z}));
  EXPECT_TRUE(testing::throws_with([&] { relu_backward(g, relu(z)); },
                                   {"relu_backward: grad and output must have the same shape"}));
}

TEST(Elementwise, BinaryGradientsWithBroadcasting) {
  using B = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, B> cases[] = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
  };
  for (const auto& [name, op] : cases) {
    Tensor a = leaf64({2, 3, 4}, 5, 0.5, 2), b = leaf64({3, 1}, 6, 0.5, 2);
    auto fn = [&f = op](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
    EXPECT_TRUE(gradcheck(fn, {a, b})) << name;
    EXPECT_TRUE(gradgradcheck(fn, {a, b})) << name;
  }
}

TEST(Elementwise, WhereGradient) {
  Tensor c = gt(uniform({3, 4}, -1, 1, {.dtype = DType::Float64, .seed = 9}), 0.0);
  Tensor a = leaf64({3, 4}, 10), b = leaf64({4}, 11);
  auto fn = [&](const std::vector<Tensor>& in) { return where(c, in[0], in[1]); };
  EXPECT_TRUE(gradcheck(fn, {a, b}));
  EXPECT_TRUE(gradgradcheck(fn, {a, b}));
}

TEST(Elementwise, ErrorsNameTheOpAndShapes) {
  try {
    add(zeros({2, 3}), zeros({4}));
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  }
  try {
    mul(zeros({2}), zeros({2}, {.dtype = DType::Float64}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mul: dtype mismatch"), std::string::npos) << e.what();
  }
  EXPECT_THROW(exp(arange(0, 3)), Error);                              // int64 exp
  EXPECT_THROW(clamp(zeros({2}), std::nullopt, std::nullopt), Error);  // neither bound
}

}  // namespace
}  // namespace remat
