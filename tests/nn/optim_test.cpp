// Optimizers (nn/optim.h) against torch.optim in PyTorch 1.13: SGD (plain, momentum, dampening,
// Nesterov, weight decay, two groups), Adam and AdamW (with and without AMSGrad and weight
// decay) over several steps on the same parameters and gradients, parameters without gradient
// skipped, state_dict round trips, zero_grad, and clear errors for bad options.
#include "nn/optim.h"

#include <functional>
#include <memory>

#include "dtr/pool.h"
#include "nn/lr_scheduler.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::bit_equal;
using testing::find_case;
using testing::FixtureCase;
using testing::throws_with;

const std::vector<FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("optim");
  return cases;
}

// A fresh leaf holding a copy of t (never the fixture's own cell: the optimizer writes in place).
Tensor param_from(const Tensor& t) {
  Tensor p = detach(clone(t));
  p.set_requires_grad(true);
  return p;
}

std::unique_ptr<nn::Optimizer> make_optimizer(const FixtureCase& c, const std::vector<Tensor>& ps) {
  const std::string& n = c.name;
  if (n == "sgd_two_groups") {
    auto opt = std::make_unique<nn::SGD>(std::vector<Tensor>{ps[0]}, nn::SGDOptions{.lr = 0.1, .momentum = 0.9});
    opt->add_param_group({ps[1]}, {.lr = 0.01, .momentum = 0.5, .weight_decay = 0.1});
    return opt;
  }
  if (n.rfind("sgd", 0) == 0)
    return std::make_unique<nn::SGD>(ps, nn::SGDOptions{.lr = c.num("lr"),
                                                        .momentum = c.num("momentum"),
                                                        .dampening = c.num("dampening"),
                                                        .weight_decay = c.num("weight_decay"),
                                                        .nesterov = c.num("nesterov") != 0});
  if (n == "adam_steplr") return std::make_unique<nn::Adam>(ps, nn::AdamOptions{.lr = c.num("lr")});
  if (n.rfind("adamw", 0) == 0)
    return std::make_unique<nn::AdamW>(ps, nn::AdamWOptions{.lr = c.num("lr"),
                                                            .betas = {c.num("beta1"), c.num("beta2")},
                                                            .eps = c.num("eps"),
                                                            .weight_decay = c.num("weight_decay"),
                                                            .amsgrad = c.num("amsgrad") != 0});
  return std::make_unique<nn::Adam>(ps, nn::AdamOptions{.lr = c.num("lr"),
                                                        .betas = {c.num("beta1"), c.num("beta2")},
                                                        .eps = c.num("eps"),
                                                        .weight_decay = c.num("weight_decay"),
                                                        .amsgrad = c.num("amsgrad") != 0});
}

// Feeds the fixture's gradient of `step` to each parameter (none where PyTorch had None).
void set_grads(const FixtureCase& c, const std::vector<Tensor>& ps, int step) {
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const std::string key = fmt::format("g{}_{}", step, i);
    ps[i].set_grad(c.tensors.count(key) ? clone(c[key]) : Tensor());
  }
}

// Runs every step of a fixture case and compares the parameters with PyTorch's after each.
void run_case(const FixtureCase& c) {
  SCOPED_TRACE(c.name);
  std::vector<Tensor> ps{param_from(c["p_0"]), param_from(c["p_1"])};
  auto opt = make_optimizer(c, ps);
  std::unique_ptr<nn::StepLR> sched;
  if (c.name == "adam_steplr")
    sched = std::make_unique<nn::StepLR>(*opt, static_cast<std::int64_t>(c.num("step_size")), c.num("gamma"));
  const bool f64 = ps[0].dtype() == DType::Float64;
  const double rtol = f64 ? 1e-12 : 1e-5, atol = f64 ? 1e-14 : 1e-6;
  const int steps = static_cast<int>(c.num("steps"));
  for (int s = 0; s < steps; ++s) {
    set_grads(c, ps, s);
    opt->step();
    if (sched) sched->step();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      SCOPED_TRACE(fmt::format("step {} parameter {}", s, i));
      EXPECT_TRUE(all_close(ps[i], c[fmt::format("after{}_{}", s, i)], rtol, atol));
      // The update is not recorded: parameters stay leaves.
      EXPECT_TRUE(ps[i].is_leaf());
      EXPECT_TRUE(ps[i].requires_grad());
    }
  }
}

class OptimFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(OptimFixture, MatchesTorchStepByStep) { run_case(find_case(fixture(), GetParam())); }

INSTANTIATE_TEST_SUITE_P(Torch, OptimFixture,
                         ::testing::Values("sgd_plain", "sgd_momentum", "sgd_dampening", "sgd_nesterov",
                                           "sgd_weight_decay", "sgd_plain_weight_decay", "sgd_nesterov_wd_f32",
                                           "adam", "adam_betas_eps", "adam_weight_decay", "adam_amsgrad",
                                           "adam_amsgrad_wd", "adam_amsgrad_wd_f32", "adamw", "adamw_weight_decay",
                                           "adamw_amsgrad", "adamw_f32", "sgd_two_groups", "adam_steplr"));

TEST(Optim, ParametersWithoutGradAreSkipped) {
  const auto& c = find_case(fixture(), "adam_amsgrad");
  std::vector<Tensor> ps{param_from(c["p_0"]), param_from(c["p_1"])};
  nn::Adam opt(ps, {.lr = c.num("lr"), .amsgrad = true});
  set_grads(c, ps, 0);  // parameter 1 has no gradient at step 0
  ASSERT_FALSE(ps[1].grad().defined());
  opt.step();
  EXPECT_TRUE(bit_equal(ps[1], c["p_1"]));
  EXPECT_EQ(opt.state(0, 1), nullptr);
  ASSERT_NE(opt.state(0, 0), nullptr);
  EXPECT_EQ(opt.state(0, 0)->step, 1);
  EXPECT_EQ(opt.state(0, 0)->buffers.size(), 3u);  // exp_avg, exp_avg_sq, max_exp_avg_sq
  set_grads(c, ps, 1);
  opt.step();
  EXPECT_EQ(opt.state(0, 0)->step, 2);
  EXPECT_EQ(opt.state(0, 1)->step, 1);
}

TEST(Optim, SgdWithAutogradGradients) {
  // loss = sum(w^2) has gradient 2w, so one SGD step gives w * (1 - 2 lr).
  Tensor w = param_from(tensor<double>({1.0, -2.0, 3.0}));
  nn::SGD opt({w}, {.lr = 0.1});
  backward(sum(mul(w, w)));
  opt.step();
  EXPECT_TRUE(all_close(w, tensor<double>({0.8, -1.6, 2.4}), 1e-15, 1e-15));
}

TEST(Optim, ZeroGrad) {
  Tensor a = param_from(tensor<float>({1, 2})), b = param_from(tensor<float>({3}));
  nn::SGD opt({a, b}, {.lr = 0.1});
  a.set_grad(tensor<float>({5, 6}));
  b.set_grad(tensor<float>({7}));
  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_TRUE(bit_equal(a.grad(), tensor<float>({0, 0})));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
}

TEST(Optim, LearningRatePerGroup) {
  Tensor a = param_from(tensor<float>({1})), b = param_from(tensor<float>({2}));
  nn::Adam opt({a}, {.lr = 0.1});
  opt.add_param_group({b}, {.lr = 0.2, .amsgrad = true});
  EXPECT_EQ(opt.num_param_groups(), 2u);
  EXPECT_EQ(opt.lr(0), 0.1);
  EXPECT_EQ(opt.lr(1), 0.2);
  opt.set_lr(1, 0.05);
  EXPECT_EQ(opt.lr(1), 0.05);
  EXPECT_TRUE(opt.options(1).amsgrad);  // the other options stay
  opt.set_lr(0.01);
  EXPECT_EQ(opt.lr(0), 0.01);
  EXPECT_EQ(opt.lr(1), 0.01);
  EXPECT_TRUE(throws_with([&] { opt.set_lr(0, -1.0); }, {"Adam", "learning rate", "-1"}));
  EXPECT_EQ(opt.lr(0), 0.01);
  EXPECT_TRUE(throws_with([&] { opt.lr(2); }, {"Adam", "no parameter group 2"}));
}

TEST(Optim, BadOptionsAreClearErrors) {
  Tensor p = param_from(tensor<float>({1, 2}));
  EXPECT_TRUE(throws_with([&] { nn::SGD({p}, {.lr = -0.1}); }, {"SGD", "learning rate", "-0.1"}));
  EXPECT_TRUE(throws_with([&] { nn::SGD({p}, {.lr = 0.1, .momentum = -0.5}); }, {"SGD", "momentum", "-0.5"}));
  EXPECT_TRUE(throws_with([&] { nn::SGD({p}, {.lr = 0.1, .nesterov = true}); }, {"SGD", "Nesterov", "momentum"}));
  EXPECT_TRUE(throws_with([&] { nn::SGD({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
                          {"SGD", "Nesterov", "dampening"}));
  EXPECT_TRUE(throws_with([&] { nn::SGD({p}, {.lr = 0.1, .weight_decay = -1}); }, {"SGD", "weight_decay"}));
  EXPECT_TRUE(throws_with([&] { nn::Adam({p}, {.lr = -1e-3}); }, {"Adam", "learning rate"}));
  EXPECT_TRUE(throws_with([&] { nn::Adam({p}, {.betas = {1.0, 0.999}}); }, {"Adam", "beta1", "[0, 1)"}));
  EXPECT_TRUE(throws_with([&] { nn::Adam({p}, {.betas = {0.9, -0.1}}); }, {"Adam", "beta2", "-0.1"}));
  EXPECT_TRUE(throws_with([&] { nn::Adam({p}, {.eps = -1}); }, {"Adam", "eps"}));
  EXPECT_TRUE(throws_with([&] { nn::AdamW({p}, {.betas = {0.9, 1.5}}); }, {"AdamW", "beta2", "1.5"}));
  EXPECT_TRUE(throws_with([&] { nn::AdamW({p}, {.weight_decay = -0.01}); }, {"AdamW", "weight_decay"}));
}

TEST(Optim, BadParametersAreClearErrors) {
  Tensor p = param_from(tensor<float>({1, 2}));
  EXPECT_TRUE(throws_with([&] { nn::SGD({}, {.lr = 0.1}); }, {"SGD", "empty parameter list"}));
  EXPECT_TRUE(throws_with([&] { nn::Adam({Tensor()}); }, {"Adam", "undefined"}));
  EXPECT_TRUE(throws_with([&] { nn::Adam({tensor<std::int64_t>({1, 2})}); }, {"Adam", "int64", "floating"}));
  EXPECT_TRUE(throws_with([&] { nn::Adam({mul(p, 2.0)}); }, {"Adam", "not a leaf"}));
  EXPECT_TRUE(throws_with([&] { nn::SGD({p, p}, {.lr = 0.1}); }, {"SGD", "appears twice"}));
  nn::SGD opt({p}, {.lr = 0.1});
  EXPECT_TRUE(throws_with([&] { opt.add_param_group({p}, {.lr = 0.1}); }, {"SGD", "already in parameter group 0"}));
  EXPECT_EQ(opt.num_param_groups(), 1u);
  p.set_grad(tensor<float>({1, 2, 3}));
  EXPECT_TRUE(throws_with([&] { opt.step(); }, {"SGD.step", "[2]", "[3]"}));
  EXPECT_TRUE(bit_equal(p, tensor<float>({1, 2})));
}

// The optimizer's state as named tensors: what PyTorch's state_dict holds, numbered across groups.
TEST(Optim, StateDictLayout) {
  const auto& c = find_case(fixture(), "sgd_momentum");
  std::vector<Tensor> ps{param_from(c["p_0"]), param_from(c["p_1"])};
  nn::SGD opt({ps[0]}, {.lr = 0.1, .momentum = 0.9});
  opt.add_param_group({ps[1]}, {.lr = 0.2, .momentum = 0.5, .nesterov = true});
  set_grads(c, ps, 0);
  opt.step();
  const auto sd = opt.state_dict();
  std::vector<std::string> keys;
  for (const auto& [k, v] : sd) keys.push_back(k);
  const std::vector<std::string> expected{
      "optimizer.SGD",          "param_groups.0.dampening", "param_groups.0.lr",        "param_groups.0.momentum",
      "param_groups.0.nesterov", "param_groups.0.params",    "param_groups.0.weight_decay", "param_groups.1.dampening",
      "param_groups.1.lr",       "param_groups.1.momentum",  "param_groups.1.nesterov", "param_groups.1.params",
      "param_groups.1.weight_decay", "state.0.momentum_buffer", "state.0.step"};
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(sd.at("param_groups.1.params").to_vector<std::int64_t>(), std::vector<std::int64_t>{1});
  EXPECT_EQ(sd.at("param_groups.1.lr").item<double>(), 0.2);
  EXPECT_EQ(sd.at("param_groups.1.nesterov").item<double>(), 1.0);
  EXPECT_EQ(sd.at("state.0.step").item<std::int64_t>(), 1);
  EXPECT_TRUE(bit_equal(sd.at("state.0.momentum_buffer"), c["g0_0"]));  // the buffer starts as the gradient
}

// Training continues identically after the state is copied into a fresh optimizer.
TEST(Optim, LoadStateDictContinuesIdentically) {
  for (const std::string name : {"sgd_weight_decay", "adam_amsgrad_wd", "adamw_f32"}) {
    SCOPED_TRACE(name);
    const auto& c = find_case(fixture(), name);
    std::vector<Tensor> ps{param_from(c["p_0"]), param_from(c["p_1"])};
    auto opt = make_optimizer(c, ps);
    for (int s = 0; s < 2; ++s) {
      set_grads(c, ps, s);
      opt->step();
    }
    // A second optimizer over copies of the parameters, loaded from the first one's state.
    std::vector<Tensor> qs{param_from(ps[0]), param_from(ps[1])};
    auto other = make_optimizer(c, qs);
    other->set_lr(0, 123.0);  // overwritten by the load
    other->load_state_dict(opt->state_dict());
    EXPECT_EQ(other->lr(0), opt->lr(0));
    for (int s = 2; s < 4; ++s) {
      set_grads(c, ps, s);
      set_grads(c, qs, s);
      opt->step();
      other->step();
      for (std::size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(bit_equal(qs[i], ps[i]));
    }
    EXPECT_TRUE(all_close(qs[0], c["after3_0"], 1e-5, 1e-6));
  }
}

TEST(Optim, LoadStateDictRejectsMismatchAndChangesNothing) {
  const auto& c = find_case(fixture(), "adam_amsgrad");
  std::vector<Tensor> ps{param_from(c["p_0"]), param_from(c["p_1"])};
  nn::Adam opt(ps, {.lr = 0.01, .amsgrad = true});
  set_grads(c, ps, 0);
  opt.step();
  const auto good = opt.state_dict();

  std::vector<Tensor> qs{param_from(c["p_0"]), param_from(c["p_1"])};
  nn::Adam target(qs, {.lr = 0.5});
  auto unchanged = [&] {
    EXPECT_EQ(target.lr(0), 0.5);
    EXPECT_FALSE(target.options(0).amsgrad);
    EXPECT_EQ(target.state(0, 0), nullptr);
  };
  auto with = [&](const std::string& key, Tensor value) {
    auto sd = good;
    if (value.defined()) sd[key] = value;
    else sd.erase(key);
    return sd;
  };
  struct Bad {
    std::map<std::string, Tensor> sd;
    std::vector<std::string> fragments;
  };
  const std::vector<Bad> bad = {
      {with("state.0.exp_avg", zeros({4, 3}, {.dtype = DType::Float64})), {"state.0.exp_avg", "[4, 3]", "[3, 4]"}},
      {with("state.0.exp_avg", zeros({3, 4}, {.dtype = DType::Float32})), {"state.0.exp_avg", "float32", "float64"}},
      {with("state.0.exp_avg_sq", Tensor()), {"missing", "state.0.exp_avg_sq"}},
      {with("state.0.momentum_buffer", zeros({3, 4}, {.dtype = DType::Float64})),
       {"unexpected", "state.0.momentum_buffer"}},
      {with("state.2.step", scalar_tensor(1, {.dtype = DType::Int64})), {"state.2.step", "2 parameters"}},
      {with("param_groups.0.beta1", scalar_tensor(1.5, {.dtype = DType::Float64})), {"beta1", "1.5"}},
      {with("param_groups.0.eps", Tensor()), {"missing", "param_groups.0.eps"}},
      {with("param_groups.0.params", tensor<std::int64_t>({0})), {"1 parameters in the state but 2"}},
      {with("param_groups.1.lr", scalar_tensor(0.1, {.dtype = DType::Float64})), {"parameter group 1", "1 groups"}},
      {with("optimizer.Adam", Tensor()), {"missing", "optimizer.Adam"}},
      {with("optimizer.SGD", scalar_tensor(1, {.dtype = DType::Int64})), {"optimizer 'SGD'", "not Adam"}},
      {with("bogus", scalar_tensor(1)), {"unexpected entry 'bogus'"}},
  };
  for (const auto& b : bad) {
    EXPECT_TRUE(throws_with([&] { target.load_state_dict(b.sd); }, b.fragments));
    unchanged();
  }
  target.load_state_dict(good);
  EXPECT_TRUE(target.options(0).amsgrad);
  ASSERT_NE(target.state(0, 0), nullptr);
  EXPECT_TRUE(bit_equal(target.state(0, 0)->buffers.at("exp_avg"), opt.state(0, 0)->buffers.at("exp_avg")));
  // The state was copied, not shared.
  EXPECT_FALSE(target.state(0, 0)->buffers.at("exp_avg").shares_storage_with(opt.state(0, 0)->buffers.at("exp_avg")));
}

// Optimizer state lives in the DTR pool like everything else: a training run under a tight
// budget (with evictions) gives bit-identical parameters.
TEST(Optim, SameNumbersUnderTightBudget) {
  const auto& c = find_case(fixture(), "adamw_amsgrad");
  auto train = [&](std::optional<std::size_t> margin) {
    std::vector<Tensor> ps{param_from(c["p_0"]), param_from(c["p_1"])};
    auto opt = make_optimizer(c, ps);
    const Tensor wide = uniform({1, 1, 256}, 0.5, 1.5, {.dtype = DType::Float64, .seed = 3});
    Pool& pool = Pool::of(Device::cpu());
    struct Unbudget {
      Pool& pool;
      ~Unbudget() { pool.set_budget(std::nullopt); }
    } unbudget{pool};
    // Whatever is resident already (fixtures, parameters) plus a margin for the training step.
    if (margin) pool.set_budget(pool.resident_bytes() + *margin);
    const auto before = pool.total_stats();
    for (int s = 0; s < 4; ++s) {
      // Gradients through a chain of wide activations ([3, 4, 256] doubles, 24 KiB each) so
      // that the budget forces evictions and rematerializations in backward.
      Tensor h = mul(unsqueeze(ps[0], 2), wide);
      for (int k = 0; k < 8; ++k) h = tanh(add(h, 0.1 * (k + 1)));
      backward(sum(mul(sum(h, {2}), c[fmt::format("g{}_0", s)])));
      opt->step();
      opt->zero_grad();
    }
    const auto evictions = pool.total_stats().evictions - before.evictions;
    return std::make_pair(ps, evictions);
  };
  const auto [free_run, no_evictions] = train(std::nullopt);
  const auto [tight_run, evictions] = train(std::size_t{100'000});
  EXPECT_EQ(no_evictions, 0u);
  EXPECT_GT(evictions, 0u);
  for (std::size_t i = 0; i < free_run.size(); ++i) EXPECT_TRUE(bit_equal(tight_run[i], free_run[i]));
}

}  // namespace
}  // namespace remat
