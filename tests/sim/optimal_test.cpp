// The optimal reference: the Checkmate MIP against optima worked out by hand on dtr_chain, its
// schedules replayed independently, Chen's segments, and the simulator's heuristics, which the
// optimum must never beat.
#include "sim/optimal.h"

#include <gtest/gtest.h>

#include <random>

#include "sim/lower_bound.h"
#include "sim/read.h"
#include "sim/replay.h"
#include "sim/sinks.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

constexpr std::size_t kTensor = 4096;
constexpr double kLimit = 60;  // seconds; the cases here solve in well under one

using Status = OptimalResult::Status;

std::string status_text(Status s) {
  switch (s) {
    case Status::Optimal:
      return "optimal";
    case Status::TimeLimit:
      return "time limit";
    case Status::Infeasible:
      return "infeasible";
    case Status::TooLarge:
      return "too large";
  }
  return "?";
}

OptimalResult chain_optimum(std::size_t n, std::size_t budget_tensors) {
  return optimal_compute(chain_program(n, kTensor), budget_tensors * kTensor, CostModel::Unit,
                         kLimit);
}

// dtr_chain with N links (tensors a0 = x, a1..aN; seed s; gradients g):
//   baseline: N chain calls, `full`, N chain_grad calls = 2N+1.  Unbudgeted, the first
//   chain_grad (reading s and a(N-1), writing g) holds a0..a(N-1), s and g: N+2 tensors, the
//   peak; every other call holds at most N+1.  Every chain_grad but the last holds a0 (never
//   released), its two gradients and its activation: 4 tensors, the least any schedule needs.

TEST(OptimalChain, EnoughBudgetIsTheBaseline) {
  const auto r = chain_optimum(6, 8);  // N+2
  ASSERT_EQ(r.status, Status::Optimal) << status_text(r.status);
  EXPECT_DOUBLE_EQ(r.compute, 13);
}

TEST(OptimalChain, OneTensorShortCostsOneRecomputation) {
  // Budget N+1: at the first chain_grad one of a1..a(N-2) must be gone; a1 is recomputed from
  // a0 once, when its chain_grad (holding 4 tensors) needs it.  No schedule does with fewer.
  const auto r = chain_optimum(6, 7);
  ASSERT_EQ(r.status, Status::Optimal) << status_text(r.status);
  EXPECT_DOUBLE_EQ(r.compute, 13 + 1);
}

TEST(OptimalChain, LeastBudgetRecomputesEachActivationFromTheInput) {
  // Budget 4: a chain_grad reading aj holds a0, its gradients and aj, nothing else, and while aj
  // is rebuilt from a0 the stage holds a0, the incoming gradient and two neighbours.  So between
  // stages only a0 and a gradient survive, and each aj (j = 1..N-2) costs j recomputations;
  // a(N-1) survives the forward.  N = 5: 11 + (1+2+3) = 17 (dtr_chain --heuristic estar gets
  // exactly this at N = 16: 33 + 105 = 138).
  const auto r = chain_optimum(5, 4);
  ASSERT_EQ(r.status, Status::Optimal) << status_text(r.status);
  EXPECT_DOUBLE_EQ(r.compute, 11 + 6);
}

TEST(OptimalChain, BelowTheWorkingSetIsInfeasible) {
  const auto r = chain_optimum(6, 3);
  EXPECT_EQ(r.status, Status::Infeasible) << status_text(r.status);
}

TEST(OptimalChain, TooManyCallsIsTooLarge) {
  const auto r = chain_optimum(kMaxOptimalCalls / 2 + 1, 64);
  EXPECT_EQ(r.status, Status::TooLarge) << status_text(r.status);
}

TEST(OptimalChain, SchedulesReplayWithinTheBudgetAtTheirCost) {
  const OpGraph g = build_op_graph(chain_program(5, kTensor), CostModel::Unit);
  for (std::size_t b : {4, 5, 6, 7}) {
    const OptimalSchedule s = optimal_schedule(g, b * kTensor, kLimit);
    ASSERT_EQ(s.result.status, Status::Optimal)
        << "budget " << b << ": " << status_text(s.result.status);
    const ScheduleCost c = play_schedule(g, s.steps);
    EXPECT_DOUBLE_EQ(c.compute, s.result.compute) << "budget " << b;
    EXPECT_LE(c.peak_bytes, b * kTensor) << "budget " << b;
    EXPECT_GE(s.result.compute, g.baseline_compute()) << "budget " << b;
  }
}

TEST(PlaySchedule, RejectsAStepBeforeItsCall) {
  const OpGraph g = build_op_graph(chain_program(3, kTensor), CostModel::Unit);
  const std::vector<std::uint32_t> steps{0, 2, 1};
  EXPECT_TRUE(testing::throws_with([&] { play_schedule(g, steps); }, {"step 1", "node 2"}));
}

TEST(PlaySchedule, UnbudgetedChainPeaksAtNPlusTwo) {
  const OpGraph g = build_op_graph(chain_program(7, kTensor), CostModel::Unit);
  std::vector<std::uint32_t> steps(g.nodes.size());
  for (std::size_t i = 0; i < steps.size(); ++i) steps[i] = static_cast<std::uint32_t>(i);
  const ScheduleCost c = play_schedule(g, steps);
  EXPECT_EQ(c.peak_bytes, 9 * kTensor);
  EXPECT_DOUBLE_EQ(c.compute, 15);
}

TEST(PlaySchedule, FreesEachOutputOfANodeAfterItsOwnLastRead) {
  // f(x) -> a (4 units), b (1); g(a) -> c (1); h(c) -> d (5); k(b) -> e (1).  a goes after g,
  // though b lives on until k: h holds x, b, c and d (8 units), not a too (12).
  Program p;
  p.origin = Origin::Trace;
  p.tensors = {{"x", kTensor}, {"a", 4 * kTensor}, {"b", kTensor},
               {"c", kTensor}, {"d", 5 * kTensor}, {"e", kTensor}};
  Event e;
  e.kind = EventKind::Constant, e.tensor = 0;
  p.events.push_back(e);
  const auto call = [&](std::string op, std::vector<std::uint32_t> args,
                        std::vector<std::uint32_t> results) {
    Event c;
    c.kind = EventKind::Call, c.op = std::move(op), c.args = std::move(args);
    c.aliases.assign(results.size(), -1), c.results = std::move(results);
    p.events.push_back(c);
  };
  call("f", {0}, {1, 2});
  call("g", {1}, {3});
  call("h", {3}, {4});
  call("k", {2}, {5});
  const OpGraph g = build_op_graph(p, CostModel::Unit);
  const std::vector<std::uint32_t> steps{0, 1, 2, 3};
  EXPECT_EQ(play_schedule(g, steps).peak_bytes, 8 * kTensor);
}

TEST(ChenChain, SqrtBudgetRecomputesEachLowerSegmentOnce) {
  // N = 16 (baseline 33) at 2 sqrt(N) + 1 = 9 tensors: segments of 4 (checkpoints a4, a8, a12).
  // The top one, a12..a15, stays from the forward: the first chain_grad then holds a0, a4, a8,
  // a12..a15, the seed and its gradient, 9 tensors.  Each lower segment is rebuilt once from
  // its checkpoint, 3 calls apiece: 33 + 9.  (Segments of 5 fit too but rebuild 4 + 4 + 4.)
  const Program p = chain_program(16, kTensor);
  const auto chen = chen_sqrt_compute(p, 9 * kTensor, CostModel::Unit);
  ASSERT_TRUE(chen);
  EXPECT_DOUBLE_EQ(*chen, 33 + 9);
  EXPECT_DOUBLE_EQ(*chen_sqrt_compute(p, 18 * kTensor, CostModel::Unit), 33);  // N+2: keeps all
  EXPECT_FALSE(chen_sqrt_compute(p, 3 * kTensor, CostModel::Unit));            // below any call
}

TEST(ChenChain, NeverBelowTheOptimumNorTheBaseline) {
  const Program p = chain_program(8, kTensor);  // baseline 17
  int fitted = 0;
  for (std::size_t b = 4; b <= 10; ++b) {
    const auto chen = chen_sqrt_compute(p, b * kTensor, CostModel::Unit);
    if (!chen) continue;
    ++fitted;
    const auto opt = optimal_compute(p, b * kTensor, CostModel::Unit, kLimit);
    ASSERT_EQ(opt.status, Status::Optimal) << "budget " << b << ": " << status_text(opt.status);
    EXPECT_LE(opt.compute, *chen + 1e-9) << "budget " << b;
    EXPECT_GE(opt.compute, 17) << "budget " << b;
    EXPECT_GE(*chen, 17) << "budget " << b;
  }
  EXPECT_GE(fitted, 4) << "Chen's schedule should fit from 6 tensors up";
}

// Binomial checkpointing equals the MIP's proven optimum on every budget where both exist, and
// its schedule replays within the budget.
TEST(RevolveChain, EqualsTheProvenOptimum) {
  for (std::size_t n : {5, 8}) {
    const Program p = chain_program(n, kTensor);
    const OpGraph g = build_op_graph(p, CostModel::Unit);
    int compared = 0;
    for (std::size_t b = 3; b <= n + 2; ++b) {
      const auto opt = optimal_compute(p, b * kTensor, CostModel::Unit, kLimit);
      const auto revolve = revolve_compute(p, b * kTensor, CostModel::Unit);
      if (opt.status == Status::Infeasible) {
        EXPECT_FALSE(revolve) << "n " << n << " budget " << b;
        continue;
      }
      ASSERT_EQ(opt.status, Status::Optimal) << "n " << n << " budget " << b;
      ASSERT_TRUE(revolve) << "n " << n << " budget " << b;
      EXPECT_DOUBLE_EQ(*revolve, opt.compute) << "n " << n << " budget " << b;
      EXPECT_LE(play_schedule(g, *revolve_schedule(g, b * kTensor)).peak_bytes, b * kTensor);
      ++compared;
    }
    EXPECT_GE(compared, 3) << "n " << n;
  }
}

// Long chains, where the MIP proves nothing: never above Chen's segments, never below the
// baseline, and with every tensor the budget allows kept, exactly the baseline.
TEST(RevolveChain, LongChainsBetweenBaselineAndChen) {
  const std::size_t n = 200;
  const Program p = chain_program(n, kTensor);
  const double baseline = 2.0 * n + 1;
  for (std::size_t b : {8, 12, 16, 29, 40}) {
    const auto revolve = revolve_compute(p, b * kTensor, CostModel::Unit);
    ASSERT_TRUE(revolve) << "budget " << b;
    EXPECT_GT(*revolve, baseline) << "budget " << b;
    if (const auto chen = chen_sqrt_compute(p, b * kTensor, CostModel::Unit)) {
      EXPECT_LE(*revolve, *chen) << "budget " << b;
    }
  }
  EXPECT_DOUBLE_EQ(*revolve_compute(p, (n + 2) * kTensor, CostModel::Unit), baseline);
  EXPECT_FALSE(revolve_compute(p, 2 * kTensor, CostModel::Unit));
}

// A heuristic's replay, recorded as a schedule, replays statically with the same compute
// within the budget, and the MIP started from it ends no worse.
TEST(OptimalStart, AHeuristicsReplayIsAStartTheResultNeverExceeds) {
  const Program p = chain_program(24, kTensor);
  const OpGraph g = build_op_graph(p, CostModel::Unit);
  ReplayOptions r;
  r.budget = 9 * kTensor;
  r.cost = CostModel::Unit;
  r.heuristic = Heuristic::Lru;
  r.record_schedule = true;
  const ReplayResult res = replay(p, r);
  ASSERT_EQ(res.status, ReplayStatus::Ok);
  ASSERT_GT(res.rematerializations, 0u);
  std::vector<std::uint32_t> steps;
  for (const std::size_t line : res.schedule_lines)
    for (std::uint32_t k = 0; k < g.nodes.size(); ++k)
      if (g.nodes[k].line == line) steps.push_back(k);
  ASSERT_EQ(steps.size(), res.schedule_lines.size());
  const ScheduleCost played = play_schedule(g, steps);
  EXPECT_DOUBLE_EQ(played.compute, res.compute);
  EXPECT_LE(played.peak_bytes, *r.budget);
  const auto opt = optimal_compute(p, *r.budget, CostModel::Unit, 2.0, {res.schedule_lines});
  ASSERT_NE(opt.status, Status::Infeasible);
  EXPECT_LE(opt.compute, res.compute + 1e-9);
  EXPECT_LE(opt.lower_bound, opt.compute + 1e-9);
}

// `dtr_chain --length 3` as the pool traced it.
constexpr const char* kChainTrace = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"x1"}
{"INSTRUCTION":"MEMORY","NAME":"x1","MEMORY":"4096"}
{"INSTRUCTION":"CALL","NAME":"chain","ARGS":["x1"],"RESULT":["x2"],"TIME":"1092","FLOPS":"1024","BYTES":"8192"}
{"INSTRUCTION":"MEMORY","NAME":"x2","MEMORY":"4096"}
{"INSTRUCTION":"ALIAS","NAME":"x2","ALIAS":"-1"}
{"INSTRUCTION":"CALL","NAME":"chain","ARGS":["x2"],"RESULT":["x3"],"TIME":"852","FLOPS":"1024","BYTES":"8192"}
{"INSTRUCTION":"MEMORY","NAME":"x3","MEMORY":"4096"}
{"INSTRUCTION":"ALIAS","NAME":"x3","ALIAS":"-1"}
{"INSTRUCTION":"CALL","NAME":"chain","ARGS":["x3"],"RESULT":["x4"],"TIME":"802","FLOPS":"1024","BYTES":"8192"}
{"INSTRUCTION":"MEMORY","NAME":"x4","MEMORY":"4096"}
{"INSTRUCTION":"ALIAS","NAME":"x4","ALIAS":"-1"}
{"INSTRUCTION":"CALL","NAME":"full","ARGS":[],"RESULT":["x5"],"TIME":"601","FLOPS":"1024","BYTES":"4096"}
{"INSTRUCTION":"MEMORY","NAME":"x5","MEMORY":"4096"}
{"INSTRUCTION":"ALIAS","NAME":"x5","ALIAS":"-1"}
{"INSTRUCTION":"CALL","NAME":"chain_grad","ARGS":["x5","x3"],"RESULT":["x6"],"TIME":"701","FLOPS":"1024","BYTES":"12288"}
{"INSTRUCTION":"MEMORY","NAME":"x6","MEMORY":"4096"}
{"INSTRUCTION":"ALIAS","NAME":"x6","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"x3"}
{"INSTRUCTION":"CALL","NAME":"chain_grad","ARGS":["x6","x2"],"RESULT":["x7"],"TIME":"691","FLOPS":"1024","BYTES":"12288"}
{"INSTRUCTION":"MEMORY","NAME":"x7","MEMORY":"4096"}
{"INSTRUCTION":"ALIAS","NAME":"x7","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"x6"}
{"INSTRUCTION":"RELEASE","NAME":"x2"}
{"INSTRUCTION":"CALL","NAME":"chain_grad","ARGS":["x7","x1"],"RESULT":["x8"],"TIME":"661","FLOPS":"1024","BYTES":"12288"}
{"INSTRUCTION":"MEMORY","NAME":"x8","MEMORY":"4096"}
{"INSTRUCTION":"ALIAS","NAME":"x8","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"x7"}
{"INSTRUCTION":"PIN","NAME":"x8"}
{"INSTRUCTION":"RELEASE","NAME":"x5"}
{"INSTRUCTION":"ACCESS","NAME":"x8"}
{"INSTRUCTION":"RELEASE","NAME":"x4"}
{"INSTRUCTION":"RELEASE","NAME":"x8"}
{"INSTRUCTION":"RELEASE","NAME":"x1"}
)";

TEST(ChainProgram, MatchesTheTraceOfDtrChain) {
  const OpGraph traced =
      build_op_graph(parse_program(kChainTrace, "dtr_chain.jsonl"), CostModel::Unit);
  const OpGraph built = build_op_graph(chain_program(3, kTensor), CostModel::Unit);
  ASSERT_EQ(traced.nodes.size(), built.nodes.size());
  for (std::size_t k = 0; k < built.nodes.size(); ++k) {
    EXPECT_EQ(traced.nodes[k].op, built.nodes[k].op) << "node " << k;
    EXPECT_EQ(traced.nodes[k].inputs, built.nodes[k].inputs) << "node " << k;
    EXPECT_EQ(traced.nodes[k].outputs, built.nodes[k].outputs) << "node " << k;
    EXPECT_EQ(traced.nodes[k].bytes, built.nodes[k].bytes) << "node " << k;
  }
  ASSERT_EQ(traced.values.size(), built.values.size());
  for (std::size_t v = 0; v < built.values.size(); ++v) {
    EXPECT_EQ(traced.values[v].held_until, built.values[v].held_until) << "value " << v;
    EXPECT_EQ(traced.values[v].output, built.values[v].output) << "value " << v;
  }
}

// A program that is not a chain: two branches from one input.
Program diamond() {
  Program p;
  p.origin = Origin::Trace;
  for (const char* name : {"x", "a", "b", "c"}) p.tensors.push_back({name, kTensor});
  auto call = [&](const char* op, std::vector<std::uint32_t> args, std::uint32_t result) {
    Event e;
    e.kind = EventKind::Call;
    e.op = op;
    e.args = std::move(args);
    e.results = {result};
    e.aliases = {-1};
    p.events.push_back(e);
  };
  Event c;
  c.kind = EventKind::Constant;
  c.tensor = 0;
  p.events.push_back(c);
  call("f", {0}, 1);
  call("g", {0}, 2);
  call("h", {1, 2}, 3);
  return p;
}

TEST(ChenChain, NotAChainHasNoSegments) {
  EXPECT_FALSE(chen_sqrt_compute(diamond(), 100 * kTensor, CostModel::Unit));
  const auto opt = optimal_compute(diamond(), 100 * kTensor, CostModel::Unit, kLimit);
  ASSERT_EQ(opt.status, Status::Optimal);
  EXPECT_DOUBLE_EQ(opt.compute, 3);
}

TEST(OptimalProgram, AReleasedConstantFreesItsBytes) {
  // Constant w (2 units) feeds f -> x (1), then w is released; g(x) -> y (1).  f holds w and x
  // (3 units), g holds x and y (2): a budget of 3 units fits with no recomputation.  Were w
  // held to the end, g would need 4.
  Program p;
  p.origin = Origin::Trace;
  p.tensors = {{"w", 2 * kTensor}, {"x", kTensor}, {"y", kTensor}};
  Event e;
  e.kind = EventKind::Constant, e.tensor = 0;
  p.events.push_back(e);
  e = {}, e.kind = EventKind::Call, e.op = "f", e.args = {0}, e.results = {1}, e.aliases = {-1};
  p.events.push_back(e);
  e = {}, e.kind = EventKind::Release, e.tensor = 0;
  p.events.push_back(e);
  e = {}, e.kind = EventKind::Call, e.op = "g", e.args = {1}, e.results = {2}, e.aliases = {-1};
  p.events.push_back(e);
  const auto fits = optimal_compute(p, 3 * kTensor, CostModel::Unit, kLimit);
  ASSERT_EQ(fits.status, Status::Optimal) << status_text(fits.status);
  EXPECT_DOUBLE_EQ(fits.compute, 2);
  p.events.erase(p.events.begin() + 2);  // w never released
  EXPECT_EQ(optimal_compute(p, 3 * kTensor, CostModel::Unit, kLimit).status, Status::Infeasible);
}

// ---- the optimum against the simulator's heuristics

// Returns the optimum (0 when infeasible or not found).
double expect_optimum_below_heuristics(const Program& p, std::size_t budget,
                                       const std::string& what) {
  const auto opt = optimal_compute(p, budget, CostModel::Unit, kLimit);
  EXPECT_TRUE(opt.status == Status::Optimal || opt.status == Status::Infeasible)
      << what << ": " << status_text(opt.status);
  if (opt.status != Status::Optimal && opt.status != Status::Infeasible) return 0;
  for (DeallocPolicy policy :
       {DeallocPolicy::EagerEvict, DeallocPolicy::Banish, DeallocPolicy::Ignore})
    for (Heuristic h : all_heuristics()) {
      ReplayOptions o;
      o.budget = budget, o.heuristic = h, o.policy = policy, o.cost = CostModel::Unit;
      const ReplayResult r = replay(p, o);
      const std::string run =
          what + ", " + std::string(heuristic_name(h)) + ", " + std::string(policy_name(policy));
      if (opt.status == Status::Infeasible) {
        EXPECT_EQ(r.status, ReplayStatus::Infeasible)
            << run << ": the optimum says infeasible, the replay " << status_name(r.status)
            << " with compute " << r.compute;
        continue;
      }
      if (r.status != ReplayStatus::Ok) continue;
      EXPECT_LE(opt.compute, r.compute + 1e-9) << run << ": optimum above the heuristic";
    }
  return opt.status == Status::Optimal ? opt.compute : 0;
}

TEST(OptimalVersusHeuristics, NeverAboveAnyHeuristicOnTheChain) {
  const Program p = chain_program(5, kTensor);
  for (std::size_t b : {3, 4, 5, 6, 7})
    expect_optimum_below_heuristics(p, b * kTensor, "dtr_chain N=5, budget " + std::to_string(b));
}

// Small random networks: a forward of calls reading the previous result and sometimes an
// earlier one (a skip), some with two results, then a backward that reads, in reverse, what
// each forward call read; a forward tensor is released after its last backward read.  Odd
// seeds are prototype logs (what is still referenced at the end must be resident then).
Program random_network(std::uint32_t seed, std::size_t layers) {
  std::mt19937 rng(seed);
  auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };
  Program p;
  p.source = "network " + std::to_string(seed);
  p.origin = seed % 2 ? Origin::PrototypeLog : Origin::Trace;
  auto fresh = [&](std::size_t units) {
    p.tensors.push_back({"x" + std::to_string(p.tensors.size()), units * kTensor});
    return static_cast<std::uint32_t>(p.tensors.size() - 1);
  };
  auto emit = [&](EventKind kind, std::uint32_t tensor) {
    Event e;
    e.kind = kind;
    e.tensor = tensor;
    p.events.push_back(e);
  };
  auto call = [&](std::string op, std::vector<std::uint32_t> args, std::size_t results) {
    Event e;
    e.kind = EventKind::Call;
    e.op = std::move(op);
    e.args = std::move(args);
    for (std::size_t r = 0; r < results; ++r)
      e.results.push_back(fresh(1 + pick(3))), e.aliases.push_back(-1);
    p.events.push_back(e);
    return e.results;
  };
  const std::uint32_t input = fresh(1);
  emit(EventKind::Constant, input);
  std::vector<std::uint32_t> acts{input};
  std::vector<std::vector<std::uint32_t>> reads;
  for (std::size_t l = 0; l < layers; ++l) {
    std::vector<std::uint32_t> args{acts.back()};
    if (acts.size() > 2 && pick(3) == 0) args.push_back(acts[pick(acts.size() - 1)]);
    reads.push_back(args);
    for (std::uint32_t r : call("f" + std::to_string(l), args, pick(4) == 0 ? 2 : 1))
      acts.push_back(r);
  }
  std::vector<std::size_t> last_read(p.tensors.size(), 0);
  for (std::size_t l = 0; l < layers; ++l)
    for (std::uint32_t t : reads[l])
      last_read[t] = std::max(last_read[t], layers - l);  // backward step
  std::uint32_t grad = call("full", {}, 1)[0];
  for (std::size_t l = layers; l-- > 0;) {
    std::vector<std::uint32_t> args{grad};
    args.insert(args.end(), reads[l].begin(), reads[l].end());
    const std::uint32_t next = call("df" + std::to_string(l), args, 1)[0];
    emit(EventKind::Release, grad);
    for (std::uint32_t t : reads[l])
      if (t != input && last_read[t] == layers - l) emit(EventKind::Release, t);
    grad = next;
  }
  return p;
}

TEST(OptimalVersusHeuristics, NeverAboveAnyHeuristicOnSmallPrograms) {
  // At the tightest twentieth of the unbudgeted peak where dtr-eq runs (and at 0.9): feasible
  // for the simulator, so the optimum must be found and be no higher.  (Proving a budget
  // infeasible can take CBC long; the chain test covers infeasible budgets.)
  int recomputing = 0;  // cases whose optimum itself recomputes
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    const Program p = random_network(seed, 6);
    ReplayOptions o;
    o.cost = CostModel::Unit;
    const ReplayResult free_run = replay(p, o);
    ASSERT_EQ(free_run.status, ReplayStatus::Ok);
    for (int twentieths = 6; twentieths <= 18; ++twentieths) {
      const double fraction = twentieths / 20.0;
      const auto budget =
          static_cast<std::size_t>(fraction * static_cast<double>(free_run.peak_bytes));
      o.budget = budget;
      if (twentieths < 18 && replay(p, o).status != ReplayStatus::Ok) continue;
      const double opt = expect_optimum_below_heuristics(
          p, budget, p.source + ", budget " + std::to_string(fraction));
      recomputing += opt > total_cost(p, CostModel::Unit);
      if (twentieths < 18) twentieths = 17;  // then 0.9
    }
  }
  EXPECT_GE(recomputing, 3) << "too few cases where recomputation is needed to tell anything";
}

// ---- the MIP without sinks (ACCESS, PIN, in-place writes)

TEST(Sinks, DropsOnlyNodesThatCreateNothingAndPutsThemBack) {
  const OpGraph g = build_op_graph(chain_program(6, kTensor), CostModel::Unit);
  const Sinks r = without_sinks(g);
  std::size_t sinks = 0, reads = 0;
  for (const auto& n : g.nodes)
    sinks += n.outputs.empty(), reads += n.op == "pin" || n.op == "access";
  ASSERT_GT(reads, 0u) << "dtr_chain's program pins and accesses";
  ASSERT_EQ(r.graph.nodes.size() + sinks, g.nodes.size());
  for (std::size_t k = 0; k < r.graph.nodes.size(); ++k) {
    const auto& kept = r.graph.nodes[k];
    const auto& was = g.nodes[r.original[k]];
    EXPECT_EQ(kept.op, was.op);
    EXPECT_EQ(kept.inputs, was.inputs);
    EXPECT_EQ(kept.outputs, was.outputs);
    for (std::uint32_t v : kept.outputs)
      EXPECT_EQ(r.graph.values[v].producer, static_cast<std::int32_t>(k));
  }
  std::vector<std::uint32_t> order(g.nodes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  EXPECT_EQ(with_sinks(g, r, drop_sinks(r, order)), order);
  EXPECT_EQ(play_schedule(r.graph, drop_sinks(r, order)).peak_bytes,
            play_schedule(g, order).peak_bytes);
}

// random_network with an ACCESS of a live tensor after about half of its calls.
Program with_accesses(Program p, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> live(p.tensors.size(), 0);
  std::vector<Event> events;
  for (const Event& e : p.events) {
    events.push_back(e);
    if (e.kind == EventKind::Constant) live[e.tensor] = 1;
    if (e.kind == EventKind::Release) live[e.tensor] = 0;
    if (e.kind != EventKind::Call) continue;
    for (std::uint32_t t : e.results) live[t] = 1;
    std::vector<std::uint32_t> candidates;
    for (std::uint32_t t = 0; t < live.size(); ++t)
      if (live[t]) candidates.push_back(t);
    if (candidates.empty() || rng() % 2) continue;
    Event access;
    access.kind = EventKind::Access;
    access.tensor = candidates[rng() % candidates.size()];
    events.push_back(access);
  }
  p.events = std::move(events);
  return p;
}

TEST(Sinks, TheSmallerGraphsOptimumBoundsTheWholeOnes) {
  int tighter = 0;  // cases where the accesses cost the whole graph something
  for (std::uint32_t seed : {2, 3, 4, 6}) {
    const Program p = with_accesses(random_network(seed, 6), seed);
    const OpGraph g = build_op_graph(p, CostModel::Unit);
    const Sinks r = without_sinks(g);
    ASSERT_LT(r.graph.nodes.size(), g.nodes.size()) << p.source;
    ReplayOptions o;
    o.cost = CostModel::Unit;
    const ReplayResult free_run = replay(p, o);
    ASSERT_EQ(free_run.status, ReplayStatus::Ok) << p.source;
    for (double fraction : {0.6, 0.7, 0.9}) {
      const auto budget =
          static_cast<std::size_t>(fraction * static_cast<double>(free_run.peak_bytes));
      const std::string what = p.source + ", budget " + std::to_string(fraction);
      // The whole graph's optimum, found through the smaller graph's MIP or, when the reads do
      // not fit back in, the whole graph's.
      const OptimalSchedule whole = optimal_schedule(g, budget, kLimit);
      const OptimalSchedule smaller = optimal_schedule(r.graph, budget, kLimit);
      if (whole.result.status == Status::Infeasible) continue;
      ASSERT_EQ(whole.result.status, Status::Optimal) << what;
      ASSERT_EQ(smaller.result.status, Status::Optimal) << what;
      EXPECT_LE(smaller.result.compute, whole.result.compute + 1e-9) << what;
      tighter += smaller.result.compute < whole.result.compute - 1e-9;
    }
  }
  EXPECT_GE(tighter, 1) << "no case where an access costs a recomputation: nothing was tested";
}

// ---- the covering LP's lower bound (sim/lower_bound.h)

RecomputeBound chain_bound(std::size_t n, std::size_t budget_tensors) {
  return recompute_lower_bound(build_op_graph(chain_program(n, kTensor), CostModel::Unit),
                               budget_tensors * kTensor, kLimit);
}

TEST(LowerBound, EnoughBudgetBindsNothing) {
  const RecomputeBound b = chain_bound(6, 8);  // N+2, the unbudgeted peak
  EXPECT_EQ(b.status, RecomputeBound::Status::Bound);
  EXPECT_EQ(b.binding_stages, 0u);
  EXPECT_DOUBLE_EQ(b.recompute, 0);
}

TEST(LowerBound, OneTensorShortIsExactlyOneRecomputation) {
  // Only the first chain_grad holds N+2 tensors; one activation it does not read must be absent
  // there, and each costs one unit call to rebuild: the bound is the optimum's 1 (see above).
  const RecomputeBound b = chain_bound(6, 7);
  ASSERT_EQ(b.status, RecomputeBound::Status::Bound);
  EXPECT_EQ(b.binding_stages, 1u);
  EXPECT_NEAR(b.recompute, 1, 1e-6);
}

TEST(LowerBound, BelowTheWorkingSetNamesTheStage) {
  // A chain_grad holds a0, its two gradients and its activation: 4 tensors.  The first one is
  // stage N+1 (N chain calls, then `full`).
  const RecomputeBound b = chain_bound(6, 3);
  EXPECT_EQ(b.status, RecomputeBound::Status::Infeasible);
  EXPECT_EQ(b.stage, 7);
}

TEST(LowerBound, NeverAboveTheOptimumOnChains) {
  // Against binomial checkpointing, exact at any length, from the least budget up.  The bound
  // leaves out what a recomputation itself must hold, so it is weak at the least budgets (where
  // the optimum rebuilds activations through chains of recomputations); from half the
  // activations up, where each is rebuilt at most once, it is within a third.
  for (std::size_t n : {8, 16, 64}) {
    const Program p = chain_program(n, kTensor);
    const double base = total_cost(p, CostModel::Unit);
    const OpGraph g = build_op_graph(p, CostModel::Unit);
    for (std::size_t b = 4; b <= n + 2; ++b) {
      const auto exact = revolve_compute(p, b * kTensor, CostModel::Unit);
      ASSERT_TRUE(exact) << n << " " << b;
      const RecomputeBound lb = recompute_lower_bound(g, b * kTensor, kLimit);
      ASSERT_EQ(lb.status, RecomputeBound::Status::Bound) << n << " " << b;
      EXPECT_LE(base + lb.recompute, *exact + 1e-6) << "N " << n << ", budget " << b;
      if (2 * b >= n + 4) {
        EXPECT_GE(lb.recompute, (*exact - base) * 2 / 3 - 1e-6) << "N " << n << ", budget " << b;
      }
    }
  }
}

TEST(LowerBound, NeverAboveTheOptimumOrAnyHeuristicOnSmallPrograms) {
  int binding = 0;  // cases where the bound is above zero, so it was tested
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    const Program p = random_network(seed, 6);
    const OpGraph g = build_op_graph(p, CostModel::Unit);
    ReplayOptions o;
    o.cost = CostModel::Unit;
    const ReplayResult free_run = replay(p, o);
    ASSERT_EQ(free_run.status, ReplayStatus::Ok);
    for (int twentieths = 6; twentieths <= 18; twentieths += 4) {
      const auto budget =
          static_cast<std::size_t>(twentieths / 20.0 * static_cast<double>(free_run.peak_bytes));
      const std::string what = p.source + ", budget " + std::to_string(twentieths) + "/20";
      const RecomputeBound lb = recompute_lower_bound(g, budget, kLimit);
      bool ran = false;  // some heuristic fits: the MIP then finds an optimum quickly
      for (Heuristic h : all_heuristics()) {
        o.budget = budget, o.heuristic = h;
        const ReplayResult r = replay(p, o);
        if (r.status != ReplayStatus::Ok) continue;
        ran = true;
        EXPECT_NE(lb.status, RecomputeBound::Status::Infeasible)
            << what << ", " << heuristic_name(h);
        EXPECT_LE(lb.recompute, r.recompute + 1e-6) << what << ", " << heuristic_name(h);
      }
      if (lb.status == RecomputeBound::Status::Infeasible || !ran) continue;
      ASSERT_EQ(lb.status, RecomputeBound::Status::Bound) << what;
      binding += lb.recompute > 0;
      const OptimalResult opt = optimal_compute(p, budget, CostModel::Unit, kLimit);
      ASSERT_EQ(opt.status, Status::Optimal) << what << ": " << status_text(opt.status);
      EXPECT_LE(total_cost(p, CostModel::Unit) + lb.recompute, opt.compute + 1e-6) << what;
    }
  }
  EXPECT_GE(binding, 10) << "too few cases where the budget binds to tell anything";
}

}  // namespace
}  // namespace remat::sim
