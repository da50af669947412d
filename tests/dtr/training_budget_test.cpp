// Training steps under a budget give bit-identical losses, gradients and parameters to the
// unbudgeted step: an MLP, a small CNN with batch norm and dropout, and a small recurrent model,
// at budgets of 0.5 and 0.3 of the unbudgeted peak and at the smallest feasible budget; peak
// resident bytes never exceed the budget.  Also second-order gradients under a tight budget.
#include "dtr/pool.h"
#include "ops/conv.h"
#include "ops/dropout.h"
#include "ops/linalg.h"
#include "ops/loss.h"
#include "ops/norm.h"
#include "ops/pool.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::bit_equal;

struct StepResult {
  std::vector<float> values;  // loss, then every gradient, then every updated parameter/buffer
  DtrStats stats;
};

// A model: fresh parameters from fixed seeds, then one SGD step; returns everything it produced.
using Model = std::function<std::vector<Tensor>()>;

Tensor param(const Shape& shape, std::uint64_t seed, double scale) {
  Tensor t = uniform(shape, -scale, scale, {.seed = seed});
  return detach(t).set_requires_grad(true);
}

// One SGD step; returns loss, gradients and updated parameters.
std::vector<Tensor> sgd_step(const Tensor& loss, std::vector<Tensor>& params, double lr) {
  backward(loss);
  std::vector<Tensor> out{loss};
  for (auto& p : params) out.push_back(p.grad());
  NoGradGuard no_grad;
  for (auto& p : params) {
    sub_(p, p.grad(), lr);
    out.push_back(p);
  }
  return out;
}

std::vector<Tensor> mlp_step() {
  manual_seed(10);
  Tensor x = randn({32, 64}, {.seed = 1});
  Tensor y = randint(0, 10, {32}, {.seed = 2});
  std::vector<Tensor> p = {param({128, 64}, 3, 0.12), param({128}, 4, 0.12), param({128, 128}, 5, 0.09),
                           param({128}, 6, 0.09), param({10, 128}, 7, 0.09), param({10}, 8, 0.09)};
  Tensor h = relu(linear(x, p[0], p[1]));
  h = relu(linear(h, p[2], p[3]));
  Tensor loss = cross_entropy(linear(h, p[4], p[5]), y);
  return sgd_step(loss, p, 0.1);
}

std::vector<Tensor> cnn_step() {
  manual_seed(20);  // dropout keys come from the default generator
  Tensor x = randn({8, 3, 16, 16}, {.seed = 21});
  Tensor y = randint(0, 10, {8}, {.seed = 22});
  std::vector<Tensor> p = {param({16, 3, 3, 3}, 23, 0.2), param({16}, 24, 0.1), param({16}, 25, 0.1),
                           param({32, 16, 3, 3}, 26, 0.08), param({32}, 27, 0.1), param({32}, 28, 0.1),
                           param({10, 32 * 4 * 4}, 29, 0.05), param({10}, 30, 0.05)};
  Tensor rm1 = zeros({16}), rv1 = ones({16}), rm2 = zeros({32}), rv2 = ones({32});
  Tensor h = conv2d(x, p[0], Tensor(), {.padding = 1});
  h = relu(batch_norm(h, p[1], p[2], rm1, rv1, true));
  h = max_pool2d(h, MaxPool2dOptions{.kernel_size = 2, .stride = 2});
  h = conv2d(h, p[3], Tensor(), {.padding = 1});
  h = relu(batch_norm(h, p[4], p[5], rm2, rv2, true));
  h = max_pool2d(h, MaxPool2dOptions{.kernel_size = 2, .stride = 2});
  h = dropout(flatten(h, 1), 0.3, true);
  Tensor loss = cross_entropy(linear(h, p[6], p[7]), y);
  auto out = sgd_step(loss, p, 0.05);
  for (auto* b : {&rm1, &rv1, &rm2, &rv2}) out.push_back(*b);
  return out;
}

std::vector<Tensor> rnn_step() {
  manual_seed(30);
  const std::int64_t steps = 12, batch = 8, in = 16, hidden = 32;
  Tensor xs = randn({steps, batch, in}, {.seed = 31});
  Tensor y = randint(0, 5, {batch}, {.seed = 32});
  std::vector<Tensor> p = {param({hidden, in}, 33, 0.25), param({hidden, hidden}, 34, 0.17),
                           param({hidden}, 35, 0.17), param({5, hidden}, 36, 0.17), param({5}, 37, 0.17)};
  Tensor h = zeros({batch, hidden});
  for (std::int64_t t = 0; t < steps; ++t)
    h = tanh(add(linear(select(xs, 0, t), p[0], p[2]), linear(h, p[1])));
  Tensor loss = cross_entropy(linear(h, p[3], p[4]), y);
  return sgd_step(loss, p, 0.1);
}

// Gradient of a gradient: the loss penalises the input-gradient's norm (as in WGAN-GP).
std::vector<Tensor> double_backward_step() {
  manual_seed(40);
  Tensor x = randn({16, 32}, {.seed = 41}).set_requires_grad(true);
  std::vector<Tensor> p = {param({64, 32}, 42, 0.17), param({64}, 43, 0.17), param({1, 64}, 44, 0.12)};
  Tensor f = linear(tanh(linear(x, p[0], p[1])), p[2]);
  Tensor gx = grad({sum(f)}, {x}, {}, true, true)[0];
  Tensor loss = add(mean(mul(gx, gx)), mean(f));
  return sgd_step(loss, p, 0.1);
}

StepResult run(const Model& model, std::optional<std::size_t> budget) {
  Pool& pool = Pool::of(Device::cpu());
  pool.set_budget(std::nullopt);
  pool.reset_stats();
  if (budget) pool.set_budget(budget);
  StepResult r;
  {
    auto outputs = model();
    r.stats = pool.stats();
    for (auto& t : outputs) {
      auto v = t.to_vector<float>();
      r.values.insert(r.values.end(), v.begin(), v.end());
    }
  }
  pool.set_budget(std::nullopt);
  return r;
}

void expect_same(const StepResult& a, const StepResult& b, const std::string& what) {
  ASSERT_EQ(a.values.size(), b.values.size()) << what;
  for (std::size_t i = 0; i < a.values.size(); ++i)
    ASSERT_EQ(std::memcmp(&a.values[i], &b.values[i], sizeof(float)), 0)
        << what << ": value " << i << " differs: " << a.values[i] << " vs " << b.values[i];
}

class TrainingUnderBudget : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { saved_ = Pool::of(Device::cpu()).config(); }
  void TearDown() override { Pool::of(Device::cpu()).configure(saved_); }
  DtrConfig saved_;
};

Model model_named(const std::string& name) {
  if (name == "mlp") return mlp_step;
  if (name == "cnn") return cnn_step;
  if (name == "rnn") return rnn_step;
  return double_backward_step;
}

TEST_P(TrainingUnderBudget, BitIdenticalAtHalfThirdAndMinimumBudget) {
  const Model model = model_named(GetParam());
  Pool& pool = Pool::of(Device::cpu());
  DtrConfig cfg;
  cfg.cost = CostModel::Flops;  // deterministic eviction choices
  pool.configure(cfg);
  const std::size_t base = pool.resident_bytes();
  const StepResult reference = run(model, std::nullopt);
  const std::size_t peak = reference.stats.peak_resident_bytes - base;
  for (double fraction : {0.5, 0.3}) {
    const std::size_t budget = base + static_cast<std::size_t>(fraction * static_cast<double>(peak));
    const StepResult r = run(model, budget);
    expect_same(reference, r, fmt::format("{} at {}", GetParam(), fraction));
    EXPECT_LE(r.stats.peak_resident_bytes, budget);
    EXPECT_GT(r.stats.evictions, 0u) << fraction;
    EXPECT_GT(r.stats.rematerializations, 0u) << fraction;
  }
  // The smallest feasible budget, to 1% of the peak, by bisection on OutOfBudget.
  std::size_t lo = 0, hi = static_cast<std::size_t>(0.3 * static_cast<double>(peak));
  while (hi - lo > peak / 100) {
    const std::size_t mid = (lo + hi) / 2;
    try {
      run(model, base + mid);
      hi = mid;
    } catch (const OutOfBudget&) {
      lo = mid;
    }
  }
  const StepResult r = run(model, base + hi);
  expect_same(reference, r, GetParam() + " at the minimum budget");
  EXPECT_LE(r.stats.peak_resident_bytes, base + hi);
  std::printf("%s: unbudgeted peak %zu B; minimum feasible budget %.3f of it (%llu evictions, %llu "
              "rematerializations)\n",
              GetParam().c_str(), peak, static_cast<double>(hi) / static_cast<double>(peak),
              static_cast<unsigned long long>(r.stats.evictions),
              static_cast<unsigned long long>(r.stats.rematerializations));
}

TEST_P(TrainingUnderBudget, EveryHeuristicAndPolicyGivesTheSameStep) {
  const Model model = model_named(GetParam());
  Pool& pool = Pool::of(Device::cpu());
  const std::size_t base = pool.resident_bytes();
  pool.configure({});
  const StepResult reference = run(model, std::nullopt);
  const std::size_t peak = reference.stats.peak_resident_bytes - base;
  for (Heuristic h : all_heuristics()) {
    for (DeallocPolicy p : {DeallocPolicy::EagerEvict, DeallocPolicy::Banish, DeallocPolicy::Ignore}) {
      DtrConfig cfg;
      cfg.heuristic = h;
      cfg.policy = p;
      cfg.cost = CostModel::Flops;
      pool.configure(cfg);
      // Banish makes dependents of released temporaries unevictable; it needs more room.
      const double fraction = p == DeallocPolicy::Banish ? 0.9 : 0.5;
      const std::size_t budget = base + static_cast<std::size_t>(fraction * static_cast<double>(peak));
      StepResult r;
      try {
        r = run(model, budget);
      } catch (const OutOfBudget& e) {
        ADD_FAILURE() << heuristic_name(h) << "/" << policy_name(p) << ": " << e.what();
        continue;
      }
      expect_same(reference, r, fmt::format("{} {}/{}", GetParam(), heuristic_name(h), policy_name(p)));
      EXPECT_LE(r.stats.peak_resident_bytes, budget);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TrainingUnderBudget,
                         ::testing::Values("mlp", "cnn", "rnn", "double_backward"));

}  // namespace
}  // namespace remat
