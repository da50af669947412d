// Losses (ops/loss.h) against PyTorch: cross_entropy with class weights, ignore_index, label
// smoothing, [N, C, d1, d2] and unbatched inputs; nll_loss; mse_loss; BCE with logits; every
// reduction, gradients, float64 first and second derivative checks, and error messages.
#include "ops/loss.h"

#include <cmath>
#include <functional>

#include "ops/softmax.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

using testing::all_close;
using testing::find_case;
using testing::FixtureCase;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

const std::vector<FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("loss");
  return cases;
}

Tensor leaf(const Tensor& t) {
  Tensor l = detach(t);
  l.set_requires_grad(true);
  return l;
}

const std::vector<std::pair<std::string, Reduction>> kReductions = {
    {"none", Reduction::None}, {"mean", Reduction::Mean}, {"sum", Reduction::Sum}};

// Runs a class-index loss case (cross_entropy or nll_loss) with every reduction and compares
// the values and the gradients of the mean and of the weighted per-element loss.
void check_class_case(const FixtureCase& c, bool is_ce) {
  const bool f64 = c["x"].dtype() == DType::Float64;
  const double rtol = f64 ? 1e-12 : 1e-5, atol = f64 ? 1e-12 : 1e-6;
  const Tensor weight = c.tensors.count("weight") ? c["weight"] : Tensor();
  const std::int64_t ignore =
      c.numbers.count("ignore_index") ? static_cast<std::int64_t>(c.num("ignore_index")) : -100;
  const double smoothing = c.numbers.count("label_smoothing") ? c.num("label_smoothing") : 0.0;
  for (const auto& [rname, r] : kReductions) {
    Tensor x = leaf(c["x"]);
    Tensor loss = is_ce ? cross_entropy(x, c["target"],
                                        {.reduction = r,
                                         .ignore_index = ignore,
                                         .label_smoothing = smoothing,
                                         .weight = weight})
                        : nll_loss(x, c["target"],
                                   {.reduction = r, .ignore_index = ignore, .weight = weight});
    EXPECT_TRUE(all_close(loss, c[rname], rtol, atol)) << c.name << " " << rname;
    if (r == Reduction::Mean) {
      EXPECT_TRUE(all_close(grad({loss}, {x})[0], c["grad_mean"], rtol, atol))
          << c.name << " grad mean";
    } else if (r == Reduction::None) {
      Tensor g = grad({sum(mul(loss, c["w_none"]))}, {x})[0];
      EXPECT_TRUE(all_close(g, c["grad_none"], rtol, atol)) << c.name << " grad none";
    }
  }
}

TEST(CrossEntropy, MatchesPyTorch) {
  for (const char* name : {"ce_basic", "ce_weight", "ce_ignore", "ce_ignore_in_range", "ce_smooth",
                           "ce_smooth_weight_ignore", "ce_4d", "ce_unbatched", "ce_f64"}) {
    check_class_case(find_case(fixture(), name), true);
  }
}

TEST(NllLoss, MatchesPyTorch) {
  for (const char* name : {"nll_basic", "nll_3d"})
    check_class_case(find_case(fixture(), name), false);
}

TEST(CrossEntropy, EqualsNllOfLogSoftmax) {
  Tensor x = normal({6, 5}, 0, 2, {.seed = 4});
  Tensor t = randint(0, 5, {6}, {.seed = 8});
  EXPECT_TRUE(all_close(cross_entropy(x, t), nll_loss(log_softmax(x, 1), t)));
}

TEST(CrossEntropy, AllIgnoredMeanIsNan) {
  Tensor t = tensor<std::int64_t>({-100, -100});
  EXPECT_TRUE(std::isnan(cross_entropy(zeros({2, 3}), t).item<float>()));
  EXPECT_EQ(cross_entropy(zeros({2, 3}), t, {.reduction = Reduction::Sum}).item<float>(), 0.0f);
}

TEST(MseLoss, MatchesPyTorch) {
  const auto& c = find_case(fixture(), "mse");
  for (const auto& [rname, r] : kReductions) {
    Tensor a = leaf(c["a"]), b = leaf(c["b"]);
    Tensor loss = mse_loss(a, b, r);
    EXPECT_TRUE(all_close(loss, c[rname])) << rname;
    if (r == Reduction::Mean) {
      auto g = grad({loss}, {a, b});
      EXPECT_TRUE(all_close(g[0], c["grad_a"]));
      EXPECT_TRUE(all_close(g[1], c["grad_b"]));
    }
  }
}

TEST(BceWithLogits, MatchesPyTorchIncludingLargeLogits) {
  const auto& c = find_case(fixture(), "bce");
  for (const auto& [rname, r] : kReductions) {
    Tensor a = leaf(c["a"]), b = leaf(c["b"]);
    Tensor loss = binary_cross_entropy_with_logits(a, b, r);
    EXPECT_TRUE(all_close(loss, c[rname])) << rname;
    if (r == Reduction::Mean) {
      auto g = grad({loss}, {a, b});
      EXPECT_TRUE(all_close(g[0], c["grad_a"]));
      EXPECT_TRUE(all_close(g[1], c["grad_b"]));
    }
  }
}

TEST(Losses, GradcheckAndGradgradcheck) {
  Tensor targets = tensor<std::int64_t>({2, 0, -100, 3, 1});
  Tensor weight = tensor<double>({0.5, 2.0, 1.0, 1.5});
  std::vector<std::pair<std::string, testing::Fn>> fns = {
      {"cross_entropy",
       [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets); }},
      {"cross_entropy_weight_smooth_sum",
       [&](const std::vector<Tensor>& in) {
         return cross_entropy(
             in[0], targets,
             {.reduction = Reduction::Sum, .label_smoothing = 0.2, .weight = weight});
       }},
      {"cross_entropy_none_smooth",
       [&](const std::vector<Tensor>& in) {
         return cross_entropy(in[0], targets,
                              {.reduction = Reduction::None, .label_smoothing = 0.1});
       }},
      {"nll_loss_weight",
       [&](const std::vector<Tensor>& in) { return nll_loss(in[0], targets, {.weight = weight}); }},
  };
  for (const auto& [name, fn] : fns) {
    Tensor x = leaf64({5, 4}, 21, -2, 2);
    EXPECT_TRUE(gradcheck(fn, {x})) << name;
    EXPECT_TRUE(gradgradcheck(fn, {x})) << name;
  }
  // [N, C, d] layout.
  Tensor t3 = tensor<std::int64_t>({0, 2, 1, -100, 2, 0}, Shape{2, 3});
  testing::Fn ce3 = [&](const std::vector<Tensor>& in) {
    return cross_entropy(in[0], t3, {.label_smoothing = 0.1});
  };
  Tensor x3 = leaf64({2, 3, 3}, 22, -2, 2);
  EXPECT_TRUE(gradcheck(ce3, {x3}));
  EXPECT_TRUE(gradgradcheck(ce3, {x3}));

  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    testing::Fn mse = [r](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1], r); };
    testing::Fn bce = [r](const std::vector<Tensor>& in) {
      return binary_cross_entropy_with_logits(in[0], in[1], r);
    };
    Tensor a = leaf64({3, 4}, 23, -3, 3), b = leaf64({3, 4}, 24, 0, 1);
    EXPECT_TRUE(gradcheck(mse, {a, b}));
    EXPECT_TRUE(gradgradcheck(mse, {a, b}));
    EXPECT_TRUE(gradcheck(bce, {a, b}));
    EXPECT_TRUE(gradgradcheck(bce, {a, b}));
  }
}

TEST(BceWithLogits, GradientAtZeroLogitIsHalfMinusTarget) {
  Tensor x = leaf(zeros({3}));
  Tensor t = tensor<float>({0.0f, 0.25f, 1.0f});
  Tensor g = grad({binary_cross_entropy_with_logits(x, t, Reduction::Sum)}, {x})[0];
  EXPECT_TRUE(all_close(g, tensor<float>({0.5f, 0.25f, -0.5f})));
}

TEST(Losses, Errors) {
  Tensor x = zeros({4, 5});
  EXPECT_TRUE(throws_with(
      [&] {
        cross_entropy(x, tensor<std::int64_t>({0, 7, 1, 2}));
      },
      {"cross_entropy", "target 7", "5 classes"}));
  EXPECT_TRUE(throws_with(
      [&] {
        cross_entropy(x, tensor<std::int64_t>({0, 1, -3, 2}));
      },
      {"cross_entropy", "target -3", "5 classes"}));
  EXPECT_TRUE(throws_with(
      [&] {
        nll_loss(x, tensor<std::int64_t>({0, 1, 5, 2}));
      },
      {"nll_loss", "target 5", "5 classes"}));
  EXPECT_TRUE(throws_with([&] { cross_entropy(x, zeros({4})); },
                          {"cross_entropy", "int64", "[4, 5]", "[4]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        cross_entropy(x, tensor<std::int64_t>({0, 1, 2}));
      },
      {"cross_entropy", "[3]", "[4, 5]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        cross_entropy(x, zeros({4, 1}, {.dtype = DType::Int64}));
      },
      {"cross_entropy", "[4, 1]", "[4, 5]"}));
  EXPECT_TRUE(throws_with(
      [&] { cross_entropy(x, zeros({4}, {.dtype = DType::Int64}), {.weight = ones({4})}); },
      {"cross_entropy", "weight", "[4]", "[4, 5]"}));
  EXPECT_TRUE(throws_with(
      [&] { cross_entropy(x, zeros({4}, {.dtype = DType::Int64}), {.label_smoothing = 1.5}); },
      {"cross_entropy", "label_smoothing", "1.5"}));
  EXPECT_TRUE(throws_with([&] { mse_loss(x, zeros({5, 4})); }, {"mse_loss", "[4, 5]", "[5, 4]"}));
  EXPECT_TRUE(throws_with([&] { binary_cross_entropy_with_logits(x, zeros({4})); },
                          {"binary_cross_entropy_with_logits", "[4, 5]", "[4]"}));
  Tensor w = ones({5});
  w.set_requires_grad(true);
  EXPECT_TRUE(
      throws_with([&] { cross_entropy(x, zeros({4}, {.dtype = DType::Int64}), {.weight = w}); },
                  {"cross_entropy", "weight", "requires grad"}));
}

}  // namespace
}  // namespace remat
