// nn/functional_optim.h: functional SGD and Adam steps against the stateful optimizers over
// several steps (every option), their first and second derivatives against float64 finite
// differences with respect to the parameter, the gradient and the state, copying a stateful
// optimizer's state, and errors.
#include "nn/functional_optim.h"

#include <cmath>

#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;
using testing::throws_with;

// Three gradients per parameter, drawn once.
std::vector<std::vector<Tensor>> gradients(const std::vector<Tensor>& params) {
  std::vector<std::vector<Tensor>> out(3);
  std::uint64_t seed = 50;
  for (auto& step : out)
    for (const Tensor& p : params) step.push_back(detach(leaf64(p.shape(), seed++)));
  return out;
}

std::vector<Tensor> two_params() {
  return {leaf64({3, 4}, 1), leaf64({5}, 2)};
}

template <class Optimizer, class State, class Options, class Step>
void expect_same_as_stateful(const Options& options, Step functional_step) {
  const auto start = two_params();
  const auto grads = gradients(start);
  std::vector<Tensor> stateful;
  for (const Tensor& p : start) stateful.push_back(clone(detach(p)).set_requires_grad(true));
  Optimizer opt(stateful, options);
  State state;
  std::vector<Tensor> functional = start;
  for (const auto& g : grads) {
    for (std::size_t i = 0; i < stateful.size(); ++i) stateful[i].set_grad(g[i]);
    opt.step();
    functional = functional_step(functional, g, state, options);
  }
  for (std::size_t i = 0; i < stateful.size(); ++i)
    EXPECT_TRUE(all_close(functional[i], stateful[i], 1e-14, 1e-14)) << "parameter " << i;
}

TEST(FunctionalOptim, SgdStepsMatchTheStatefulOptimizer) {
  for (const nn::SGDOptions& o :
       {nn::SGDOptions{.lr = 0.1}, nn::SGDOptions{.lr = 0.1, .momentum = 0.9},
        nn::SGDOptions{.lr = 0.05, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.01},
        nn::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true}}) {
    SCOPED_TRACE(o.momentum);
    expect_same_as_stateful<nn::SGD, nn::SGDState>(
        o, [](auto p, auto g, auto& s, auto& opt) { return nn::sgd_step(p, g, s, opt); });
  }
}

TEST(FunctionalOptim, AdamStepsMatchTheStatefulOptimizer) {
  for (const nn::AdamOptions& o :
       {nn::AdamOptions{.lr = 0.01}, nn::AdamOptions{.lr = 0.01, .betas = {0.5, 0.9}},
        nn::AdamOptions{.lr = 0.02, .weight_decay = 0.1},
        nn::AdamOptions{.lr = 0.01, .eps = 1e-3, .amsgrad = true}}) {
    SCOPED_TRACE(o.betas.first);
    expect_same_as_stateful<nn::Adam, nn::AdamState>(
        o, [](auto p, auto g, auto& s, auto& opt) { return nn::adam_step(p, g, s, opt); });
  }
}

// The second step's update (a state with moments) as a function of the parameter, the
// gradient and both moments.
TEST(FunctionalOptim, AdamStepFirstAndSecondDerivativesMatchFiniteDifferences) {
  for (bool amsgrad : {false, true}) {
    SCOPED_TRACE(amsgrad);
    const nn::AdamOptions o{
        .lr = 0.1, .betas = {0.5, 0.9}, .eps = 1e-3, .weight_decay = 0.05, .amsgrad = amsgrad};
    auto fn = [&](const std::vector<Tensor>& in) {
      nn::AdamState s;
      s.step = 1, s.exp_avg = {in[2]}, s.exp_avg_sq = {in[3]};
      if (amsgrad) s.max_exp_avg_sq = {in[4]};
      return nn::adam_step({&in[0], 1}, {&in[1], 1}, s, o)[0];
    };
    // Second moments kept away from 0 (sqrt) and, for amsgrad, maxima away from ties.
    std::vector<Tensor> in{leaf64({2, 3}, 1), leaf64({2, 3}, 2), leaf64({2, 3}, 3),
                           leaf64({2, 3}, 4, 0.5, 1.0), leaf64({2, 3}, 5, 1.5, 2.0)};
    if (!amsgrad) in.pop_back();
    EXPECT_TRUE(gradcheck(fn, in));
    EXPECT_TRUE(gradgradcheck(fn, in));
  }
  // A first step from an empty state, with respect to the parameter and the gradient.
  auto first = [](const std::vector<Tensor>& in) {
    nn::AdamState s;
    return nn::adam_step({&in[0], 1}, {&in[1], 1}, s, {.lr = 0.1})[0];
  };
  EXPECT_TRUE(gradcheck(first, {leaf64({4}, 6), leaf64({4}, 7, 0.5, 1.0)}));
  EXPECT_TRUE(gradgradcheck(first, {leaf64({4}, 6), leaf64({4}, 7, 0.5, 1.0)}));
}

// A gradient exactly 0 (a dead ReLU unit): the update m / (sqrt(v) + eps) still has a
// derivative, (1 - beta1) / eps times -lr / (1 - beta1) on a first step; sqrt's infinite
// derivative at 0 must not turn it into NaN.
TEST(FunctionalOptim, AdamStepHasAFiniteDerivativeAtAZeroGradient) {
  const Tensor p = leaf64({3}, 1);
  const Tensor g = zeros({3}, {.dtype = DType::Float64}).set_requires_grad(true);
  nn::AdamState s;
  const nn::AdamOptions o{.lr = 0.1, .betas = {0.5, 0.999}, .eps = 1e-3};
  const Tensor stepped = nn::adam_step({&p, 1}, {&g, 1}, s, o)[0];
  EXPECT_TRUE(all_close(stepped, p, 0, 0));
  const Tensor d = grad({sum(stepped)}, {g}, {}, true, /*create_graph=*/true)[0];
  for (double v : d.to_vector<double>()) EXPECT_NEAR(v, -0.1 / 1e-3, 1e-9);
  // And the second derivative is finite too.
  for (double v :
       grad({sum(d)}, {g}, {}, false, false, /*allow_unused=*/true)[0].to_vector<double>())
    EXPECT_TRUE(std::isfinite(v));
}

TEST(FunctionalOptim, SgdStepFirstAndSecondDerivativesMatchFiniteDifferences) {
  const nn::SGDOptions o{
      .lr = 0.1, .momentum = 0.9, .dampening = 0.2, .weight_decay = 0.1, .nesterov = false};
  auto fn = [&](const std::vector<Tensor>& in) {
    nn::SGDState s{.momentum_buffer = {in[2]}};
    // The step itself is linear; squaring makes second derivatives non-zero.
    return pow(nn::sgd_step({&in[0], 1}, {&in[1], 1}, s, o)[0], 2.0);
  };
  const std::vector<Tensor> in{leaf64({3}, 1), leaf64({3}, 2), leaf64({3}, 3)};
  EXPECT_TRUE(gradcheck(fn, in));
  EXPECT_TRUE(gradgradcheck(fn, in));
}

// A loss after two unrolled steps, differentiated with respect to the starting point: the
// gradient goes through both steps' gradients (second derivatives of the inner loss).
TEST(FunctionalOptim, UnrolledAdamStepsDifferentiateThroughTheInnerGradients) {
  const Tensor target = detach(leaf64({4}, 9));
  auto fn = [&](const std::vector<Tensor>& in) {
    GradModeGuard grad_on(true);  // gradcheck's finite differences run without grad mode
    Tensor w = in[0].requires_grad() ? in[0] : detach(in[0]).set_requires_grad(true);
    nn::AdamState s;
    std::vector<Tensor> at{w};
    for (int k = 0; k < 2; ++k) {
      const Tensor inner = sum(pow(sub(mul(at[0], at[0]), target), 2.0));
      auto g = grad({inner}, at, {}, true, /*create_graph=*/true);
      at = nn::adam_step(at, g, s, {.lr = 0.05, .eps = 1e-2});
    }
    return pow(at[0], 3.0);
  };
  EXPECT_TRUE(gradcheck(fn, {leaf64({4}, 10, 0.5, 1.5)}));
}

TEST(FunctionalOptim, StateOfCopiesTheStatefulOptimizer) {
  auto params = two_params();
  nn::Adam adam(params, {.lr = 0.01});
  EXPECT_EQ(nn::AdamState::of(adam).step, 0);
  EXPECT_TRUE(nn::AdamState::of(adam).exp_avg.empty());
  const auto grads = gradients(params);
  for (std::size_t i = 0; i < params.size(); ++i) params[i].set_grad(grads[0][i]);
  adam.step();
  nn::AdamState s = nn::AdamState::of(adam);
  EXPECT_EQ(s.step, 1);
  ASSERT_EQ(s.exp_avg.size(), 2u);
  EXPECT_TRUE(all_close(s.exp_avg[1], adam.state(0, 1)->buffers.at("exp_avg"), 0, 0));
  // A functional step from the copy leaves the optimizer where it was.
  const Tensor before = clone(adam.state(0, 0)->buffers.at("exp_avg_sq"));
  nn::adam_step(params, grads[1], s, {.lr = 0.01});
  EXPECT_TRUE(all_close(adam.state(0, 0)->buffers.at("exp_avg_sq"), before, 0, 0));
  EXPECT_EQ(adam.state(0, 0)->step, 1);

  nn::SGD sgd(two_params(), {.lr = 0.1, .momentum = 0.9});
  EXPECT_TRUE(nn::SGDState::of(sgd).momentum_buffer.empty());
}

TEST(FunctionalOptim, BadInputIsAnErrorNamingIt) {
  const auto p = two_params();
  const auto g = gradients(p)[0];
  nn::AdamState s;
  EXPECT_TRUE(throws_with(
      [&] {
        nn::adam_step(p, {&g[0], 1}, s, {});
      },
      {"adam_step", "2 parameters", "1 gradients"}));
  const std::vector<Tensor> swapped{g[1], g[0]};
  EXPECT_TRUE(
      throws_with([&] { nn::adam_step(p, swapped, s, {}); }, {"parameter 0", "[3, 4]", "[5]"}));
  EXPECT_TRUE(throws_with([&] { nn::adam_step(p, g, s, {.lr = -1}); }, {"learning rate", "-1"}));
  nn::SGDState one{.momentum_buffer = {g[0]}};
  EXPECT_TRUE(throws_with([&] { nn::sgd_step(p, g, one, {.momentum = 0.9}); },
                          {"sgd_step", "1 entries", "2 parameters"}));
}

}  // namespace
}  // namespace remat
