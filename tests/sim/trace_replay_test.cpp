// A trace of a real training step replays exactly: unbudgeted, the simulator reproduces the
// step's peak resident bytes and compute; under a budget its evictions, rematerializations and
// heuristic metadata accesses equal the runtime's, for several heuristics, with the unit and
// flops cost models and with time (the trace records the time cost each call was scored with,
// or would have been unbudgeted).
// The runtime's own counters are the reference.
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "core/allocator.h"
#include "sim/read.h"
#include "sim/replay.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

Tensor param(const Shape& shape, std::uint64_t seed, double scale) {
  return detach(uniform(shape, -scale, scale, {.seed = seed})).set_requires_grad(true);
}

void sgd(std::vector<Tensor>& params, double lr) {
  NoGradGuard no_grad;
  for (auto& p : params) sub_(p, p.grad(), lr);
}

// An MLP step: forward, backward, in-place SGD updates (copy-on-write of old parameter values
// that records still read), and the loss read back (an access).
void mlp_step() {
  Tensor x = randn({512, 64}, {.seed = 1});
  Tensor y = randint(0, 10, {512}, {.seed = 2});
  std::vector<Tensor> p = {param({128, 64}, 3, 0.12), param({128}, 4, 0.12)};
  for (std::uint64_t l = 1; l < 5; ++l)
    p.push_back(param({128, 128}, 5 + 2 * l, 0.09)), p.push_back(param({128}, 6 + 2 * l, 0.09));
  p.push_back(param({10, 128}, 30, 0.09));
  p.push_back(param({10}, 31, 0.09));
  Tensor h = x;
  for (std::size_t l = 0; l < 5; ++l) h = relu(linear(h, p[2 * l], p[2 * l + 1]));
  Tensor loss = cross_entropy(linear(h, p[10], p[11]), y);
  backward(loss);
  sgd(p, 0.1);
  (void)loss.item<float>();
}

// A small CNN step with batch norm (in-place running statistics) and dropout.
void cnn_step() {
  manual_seed(20);
  Tensor x = randn({4, 3, 12, 12}, {.seed = 21});
  Tensor y = randint(0, 10, {4}, {.seed = 22});
  constexpr int kBlocks = 6;
  std::vector<Tensor> p = {param({8, 3, 3, 3}, 23, 0.2)};
  for (std::uint64_t b = 1; b < kBlocks; ++b) p.push_back(param({8, 8, 3, 3}, 23 + 10 * b, 0.1));
  for (std::uint64_t b = 0; b < kBlocks; ++b)
    p.push_back(param({8}, 160 + b, 0.1)), p.push_back(param({8}, 170 + b, 0.1));
  p.push_back(param({10, 8 * 3 * 3}, 29, 0.05));
  p.push_back(param({10}, 30, 0.05));
  std::vector<Tensor> stats;
  for (int b = 0; b < kBlocks; ++b) stats.push_back(zeros({8})), stats.push_back(ones({8}));
  Tensor h = x;
  for (int b = 0; b < kBlocks; ++b) {
    h = conv2d(h, p[b], Tensor(), {.padding = 1});
    h = relu(batch_norm(h, p[kBlocks + 2 * b], p[kBlocks + 1 + 2 * b], stats[2 * b],
                        stats[2 * b + 1], true));
  }
  h = max_pool2d(h, MaxPool2dOptions{.kernel_size = 4, .stride = 4});
  h = dropout(flatten(h, 1), 0.3, true);
  Tensor loss = cross_entropy(linear(h, p[3 * kBlocks], p[3 * kBlocks + 1]), y);
  backward(loss);
  sgd(p, 0.05);
  (void)loss.item<float>();
}

struct Recorded {
  DtrStats stats;              // the runtime's counters over the step
  bool out_of_budget = false;  // the step threw OutOfBudget; its trace ends before the failed op
  std::size_t base = 0;        // resident bytes before the step (constants of earlier tests)
  Program program;
};

class TraceReplay : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = Pool::of(Device::cpu()).config(); }
  void TearDown() override {
    Pool::of(Device::cpu()).configure(saved_);
    std::filesystem::remove(path_);
  }

  // Runs the step on the CPU pool under `budget` (bytes above what is resident before it) while
  // tracing, and reads the trace back.  The allocator cache starts empty, as the simulator's.
  Recorded record(const std::function<void()>& step, DtrConfig cfg,
                  std::optional<std::size_t> budget) {
    Pool& pool = Pool::of(Device::cpu());
    cfg.budget.reset();
    pool.configure(cfg);
    allocator_for(Device::cpu()).release_all_cached();
    Recorded r;
    r.base = pool.resident_bytes();
    EXPECT_EQ(pool.evictable_cells(), 0u) << "cells of an earlier test are still evictable";
    if (budget) pool.set_budget(r.base + *budget);
    pool.reset_stats();
    pool.start_trace(path_);
    try {
      step();
    } catch (const OutOfBudget&) {
      r.out_of_budget = true;
    }
    pool.stop_trace();
    r.stats = pool.stats();
    pool.set_budget(std::nullopt);
    r.program = read_programs(path_).at(0);
    return r;
  }

  std::string path_ = testing::unique_temp_path("remat_trace_replay", ".jsonl");
  DtrConfig saved_;
};

void expect_same_counts(const Recorded& real, const ReplayResult& sim, const std::string& what) {
  ASSERT_FALSE(real.out_of_budget) << what << ": the step did not fit its budget";
  EXPECT_EQ(sim.status, ReplayStatus::Ok) << what << ": " << sim.message;
  EXPECT_EQ(sim.calls, real.stats.calls) << what;
  EXPECT_EQ(sim.executions, real.stats.executions) << what;
  EXPECT_EQ(sim.evictions, real.stats.evictions) << what;
  EXPECT_EQ(sim.rematerializations, real.stats.rematerializations) << what;
  EXPECT_EQ(sim.metadata_accesses, real.stats.metadata_accesses) << what;
  EXPECT_EQ(sim.candidates_drawn, real.stats.candidates_drawn) << what;
  EXPECT_EQ(sim.peak_bytes, real.stats.peak_resident_bytes - real.base) << what;
}

TEST_F(TraceReplay, UnbudgetedStepReproducesPeakAndCompute) {
  for (const auto& [name, step] : {std::pair{"mlp", std::function<void()>(mlp_step)},
                                   std::pair{"cnn", std::function<void()>(cnn_step)}}) {
    const Recorded real = record(step, {}, std::nullopt);
    EXPECT_EQ(real.program.origin, Origin::Trace);
    ReplayOptions o;
    o.cost = CostModel::Time;
    const ReplayResult sim = replay(real.program, o);
    expect_same_counts(real, sim, name);
    EXPECT_EQ(sim.evictions, 0u);
    // The trace carries each kernel's measured seconds exactly; the runtime's window total is a
    // difference of running sums, hence the relative tolerance of a few roundings.
    EXPECT_NEAR(sim.compute, real.stats.compute_seconds, 1e-12 * real.stats.compute_seconds)
        << name;
    o.cost = CostModel::Unit;
    EXPECT_EQ(replay(real.program, o).compute, static_cast<double>(real.stats.executions)) << name;
  }
}

TEST_F(TraceReplay, BudgetedCountsEqualTheRuntimes) {
  // The unbudgeted peak of the step, from a traced run of it.
  const std::size_t peak = record(mlp_step, {}, std::nullopt).stats.peak_resident_bytes -
                           Pool::of(Device::cpu()).resident_bytes();
  for (CostModel cost : {CostModel::Unit, CostModel::Flops, CostModel::Time}) {
    for (Heuristic h : {Heuristic::DtrEq, Heuristic::Dtr, Heuristic::Lru, Heuristic::Msps}) {
      DtrConfig cfg;
      cfg.heuristic = h;
      cfg.cost = cost;
      cfg.seed = 7;
      const std::size_t budget = peak * 6 / 10;
      const Recorded real = record(mlp_step, cfg, budget);
      ASSERT_GT(real.stats.evictions, 0u) << "the budget must make the step evict";
      ReplayOptions o;
      o.budget = budget;
      o.heuristic = h;
      o.cost = cost;
      o.seed = 7;
      const std::string what =
          fmt::format("mlp {} {} cost", heuristic_name(h), cost_model_name(cost));
      const ReplayResult sim = replay(real.program, o);
      expect_same_counts(real, sim, what);
      if (cost == CostModel::Unit) {
        EXPECT_EQ(sim.compute, static_cast<double>(real.stats.executions)) << what;
      }
    }
  }
}

TEST_F(TraceReplay, DtrNextLearnsStepByStepAsTheRunDid) {
  // Three steps under dtr-next, each ended with pool.end_step(): the first scores as dtr-eq, the
  // others by the last step's next uses.  The trace marks the ends, and the replay learns at
  // them as the run did, so its counts are the run's.
  Pool& pool = Pool::of(Device::cpu());
  const std::size_t peak =
      record(mlp_step, {}, std::nullopt).stats.peak_resident_bytes - pool.resident_bytes();
  for (CostModel cost : {CostModel::Unit, CostModel::Flops}) {
    DtrConfig cfg;
    cfg.heuristic = Heuristic::DtrNext;
    cfg.cost = cost;
    cfg.seed = 7;
    pool.configure(cfg);
    pool.end_step(), pool.end_step();  // no last step learned from earlier tests
    const std::size_t budget = peak * 6 / 10;
    const Recorded real = record(
        [&] {
          for (int step = 0; step < 3; ++step) mlp_step(), pool.end_step();
        },
        cfg, budget);
    ASSERT_GT(real.stats.evictions, 0u) << "the budget must make the steps evict";
    EXPECT_TRUE(marks_steps(real.program));
    ReplayOptions o;
    o.budget = budget;
    o.heuristic = Heuristic::DtrNext;
    o.cost = cost;
    o.seed = 7;
    expect_same_counts(real, replay(real.program, o),
                       fmt::format("mlp, 3 steps, dtr-next, {} cost", cost_model_name(cost)));
  }
}

TEST_F(TraceReplay, UnbudgetedTraceRecordsTheTimeCostModelsEstimates) {
  // Unbudgeted, the runtime scores nothing, but its trace still records what the time cost
  // model would score (the fastest run so far of the op's size class), not each call's own
  // time: a replay is then priced as a budgeted run would be.  A call of the same op on the
  // same shapes as an earlier one costs at most the faster of the two.
  const Recorded real = record(mlp_step, {}, std::nullopt);
  std::map<std::tuple<std::string, std::size_t, double, double>, double> fastest;
  std::size_t repeated = 0;
  for (const Event& e : real.program.events) {
    if (e.kind != EventKind::Call) continue;
    auto [it, first] = fastest.try_emplace({e.op, e.args.size(), e.flops, e.bytes}, e.seconds);
    it->second = std::min(it->second, e.seconds);
    repeated += first ? 0 : 1;
    EXPECT_GT(e.time_cost, 0) << e.op;
    EXPECT_LE(e.time_cost, it->second) << e.op << " at line " << e.line;
  }
  EXPECT_GT(repeated, 10u);
}

TEST_F(TraceReplay, CellsFromBeforeTracingEnterAsConstants) {
  // As in the examples, whose parameters exist before --trace takes effect.
  Tensor w = reshape(tensor<float>(std::vector<float>(256, 0.5f)), {16, 16});
  const Recorded real =
      record([&] { (void)sum(relu(matmul(w, w))).item<float>(); }, {}, std::nullopt);
  ASSERT_FALSE(real.program.events.empty());
  const Event& first = real.program.events.front();
  EXPECT_EQ(first.kind, EventKind::Constant);
  EXPECT_EQ(real.program.tensors[first.tensor].bytes, 256u * sizeof(float));
  const ReplayResult sim = replay(real.program, {});
  EXPECT_EQ(sim.status, ReplayStatus::Ok);
  EXPECT_EQ(sim.calls, real.stats.calls);
}

TEST_F(TraceReplay, SampledCandidatesAndSeedAgree) {
  // Scoring 4 sampled candidates per eviction exercises the pool's seeded sampling.
  const std::size_t peak = record(mlp_step, {}, std::nullopt).stats.peak_resident_bytes -
                           Pool::of(Device::cpu()).resident_bytes();
  for (std::uint64_t seed : {1u, 2u}) {
    DtrConfig cfg;
    cfg.cost = CostModel::Unit;
    cfg.sample = 4;
    cfg.seed = seed;
    const Recorded real = record(mlp_step, cfg, peak * 6 / 10);
    ASSERT_GT(real.stats.evictions, 0u);
    ReplayOptions o;
    o.budget = peak * 6 / 10;
    o.cost = CostModel::Unit;
    o.sample = 4;
    o.seed = seed;
    expect_same_counts(real, replay(real.program, o), fmt::format("mlp sampled, seed {}", seed));
  }
}

TEST_F(TraceReplay, BudgetedCnnWithBatchNormAndDropout) {
  const std::size_t peak = record(cnn_step, {}, std::nullopt).stats.peak_resident_bytes -
                           Pool::of(Device::cpu()).resident_bytes();
  for (Heuristic h : {Heuristic::DtrEq, Heuristic::DtrLocal}) {
    DtrConfig cfg;
    cfg.heuristic = h;
    cfg.cost = CostModel::Flops;
    const Recorded real = record(cnn_step, cfg, peak * 6 / 10);
    ASSERT_GT(real.stats.rematerializations, 0u);
    ReplayOptions o;
    o.budget = peak * 6 / 10;
    o.heuristic = h;
    o.cost = CostModel::Flops;
    expect_same_counts(real, replay(real.program, o), fmt::format("cnn {}", heuristic_name(h)));
  }
}

}  // namespace
}  // namespace remat::sim
