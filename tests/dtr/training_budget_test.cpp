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
  // Sizes keep activations well above the parameters: an optimizer update keeps the old
  // parameter values (copy-on-write) while this step's records may still replay from them.
  manual_seed(10);
  Tensor x = randn({1024, 64}, {.seed = 1});
  Tensor y = randint(0, 10, {1024}, {.seed = 2});
  // Ten hidden layers: one op's working set (three 512 KiB activations) stays well below 0.3
  // of the step's peak.
  std::vector<Tensor> p = {param({128, 64}, 3, 0.12), param({128}, 4, 0.12)};
  constexpr std::size_t kLayers = 10;
  for (std::uint64_t l = 1; l < kLayers; ++l) p.push_back(param({128, 128}, 5 + 2 * l, 0.09)), p.push_back(param({128}, 6 + 2 * l, 0.09));
  p.push_back(param({10, 128}, 30, 0.09));
  p.push_back(param({10}, 31, 0.09));
  Tensor h = x;
  for (std::size_t l = 0; l < kLayers; ++l) h = relu(linear(h, p[2 * l], p[2 * l + 1]));
  Tensor loss = cross_entropy(linear(h, p[2 * kLayers], p[2 * kLayers + 1]), y);
  return sgd_step(loss, p, 0.1);
}

std::vector<Tensor> cnn_step() {
  manual_seed(20);  // dropout keys come from the default generator
  Tensor x = randn({8, 3, 16, 16}, {.seed = 21});
  Tensor y = randint(0, 10, {8}, {.seed = 22});
  // Twelve conv-bn-relu blocks at full resolution, so one op's working set is well below 0.3
  // of the step's peak, then pooling, dropout and a linear classifier.
  constexpr int kBlocks = 12;
  std::vector<Tensor> p = {param({16, 3, 3, 3}, 23, 0.2)};
  for (std::uint64_t b = 1; b < kBlocks; ++b) p.push_back(param({16, 16, 3, 3}, 23 + 10 * b, 0.08));
  for (std::uint64_t b = 0; b < kBlocks; ++b) {
    p.push_back(param({16}, 160 + b, 0.1));
    p.push_back(param({16}, 170 + b, 0.1));
  }
  p.push_back(param({10, 16 * 4 * 4}, 29, 0.05));
  p.push_back(param({10}, 30, 0.05));
  std::vector<Tensor> stats;
  for (int b = 0; b < kBlocks; ++b) stats.push_back(zeros({16})), stats.push_back(ones({16}));
  Tensor h = x;
  for (int b = 0; b < kBlocks; ++b) {
    h = conv2d(h, p[b], Tensor(), {.padding = 1});
    h = relu(batch_norm(h, p[kBlocks + 2 * b], p[kBlocks + 1 + 2 * b], stats[2 * b], stats[2 * b + 1], true));
  }
  h = max_pool2d(h, MaxPool2dOptions{.kernel_size = 4, .stride = 4});
  h = dropout(flatten(h, 1), 0.3, true);
  Tensor loss = cross_entropy(linear(h, p[3 * kBlocks], p[3 * kBlocks + 1]), y);
  auto out = sgd_step(loss, p, 0.05);
  for (auto& s : stats) out.push_back(s);
  return out;
}

std::vector<Tensor> rnn_step() {
  manual_seed(30);
  const std::int64_t steps = 32, batch = 128, in = 8, hidden = 64;
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
  Tensor x = randn({256, 32}, {.seed = 41}).set_requires_grad(true);
  std::vector<Tensor> p = {param({64, 32}, 42, 0.17), param({64}, 43, 0.17)};
  constexpr std::size_t kLayers = 10;
  for (std::uint64_t l = 0; l < kLayers; ++l) p.push_back(param({64, 64}, 50 + l, 0.12)), p.push_back(param({64}, 70 + l, 0.12));
  p.push_back(param({1, 64}, 44, 0.12));
  Tensor h = tanh(linear(x, p[0], p[1]));
  for (std::size_t l = 0; l < kLayers; ++l) h = tanh(linear(h, p[2 + 2 * l], p[3 + 2 * l]));
  Tensor f = linear(h, p[2 + 2 * kLayers]);
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
    // Reading the results back rematerializes whatever was evicted; the values are the same
    // with or without the budget, so read them without it.
    pool.set_budget(std::nullopt);
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

// Budgets each model must run at.  The double-backward step keeps its first backward's graph
// (every gradient of it is saved for the second backward), which needs more room than 0.3.
std::vector<double> required_fractions(const std::string& model) {
  if (model == "double_backward") return {0.5, 0.4};
  return {0.5, 0.3};
}

TEST_P(TrainingUnderBudget, BitIdenticalAtRequiredAndMinimumBudgets) {
  const Model model = model_named(GetParam());
  Pool& pool = Pool::of(Device::cpu());
  DtrConfig cfg;
  cfg.cost = CostModel::Flops;  // deterministic eviction choices
  pool.configure(cfg);
  const std::size_t base = pool.resident_bytes();
  const StepResult reference = run(model, std::nullopt);
  const std::size_t peak = reference.stats.peak_resident_bytes - base;
  auto budget_at = [&](double f) { return base + static_cast<std::size_t>(f * static_cast<double>(peak)); };
  const auto fractions = required_fractions(GetParam());
  for (double fraction : fractions) {
    const StepResult r = run(model, budget_at(fraction));
    expect_same(reference, r, fmt::format("{} at {}", GetParam(), fraction));
    EXPECT_LE(r.stats.peak_resident_bytes, budget_at(fraction));
    EXPECT_GT(r.stats.evictions, 0u) << fraction;
    EXPECT_GT(r.stats.rematerializations, 0u) << fraction;
  }
  // The smallest feasible budget: step down by 2% of the peak until the step no longer fits.
  double smallest = fractions.back();
  StepResult at_smallest = run(model, budget_at(smallest));
  for (double f = smallest - 0.02; f > 0.01; f -= 0.02) {
    try {
      at_smallest = run(model, budget_at(f));
      smallest = f;
    } catch (const OutOfBudget&) {
      break;
    }
    expect_same(reference, at_smallest, fmt::format("{} at {}", GetParam(), f));
    EXPECT_LE(at_smallest.stats.peak_resident_bytes, budget_at(f));
  }
  std::printf("%s: unbudgeted peak %zu B; smallest feasible budget found %.2f of it (%llu evictions, "
              "%llu rematerializations there)\n",
              GetParam().c_str(), peak, smallest, static_cast<unsigned long long>(at_smallest.stats.evictions),
              static_cast<unsigned long long>(at_smallest.stats.rematerializations));
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
      const double fraction = p == DeallocPolicy::Banish ? 1.0 : 0.6;
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
