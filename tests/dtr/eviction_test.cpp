// Eviction and rematerialization: budgets hold at every moment, evicted cells come back with
// bit-identical bytes, deep chains rematerialize without recursion, multi-output records restore
// every output, and OutOfBudget leaves a usable pool.
#include "dtr/pool.h"
#include "nn/nn.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::bit_equal;

using testing::cell_of;

// Restores the pool's configuration after each test.
class Eviction : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = pool().config();
    pool().reset_stats();
  }
  void TearDown() override { pool().configure(saved_); }
  static Pool& pool() { return Pool::of(Device::cpu()); }
  DtrConfig saved_;
};

TEST_F(Eviction, EvictedCellsRecomputeIdenticalBytes) {
  Tensor x = randn({64, 64}, {.seed = 1});
  Tensor y = exp(tanh(x));
  Tensor expected = clone(y);
  pool().evict(cell_of(y));
  EXPECT_FALSE(cell_of(y).resident());
  EXPECT_TRUE(bit_equal(y, expected));  // access rematerializes
  EXPECT_TRUE(cell_of(y).resident());
  EXPECT_EQ(pool().stats().rematerializations, 2u);  // tanh (released) and exp
}

// The prototype's stamps (dtr_sim --prototype stamp-first, keep-stamp, compute-clock): a
// rebuilt record's inputs are stamped when the rebuild starts, so on the compute clock the
// recomputed a keeps the reading from before its own replay; ours stamps a when b's frame
// pins it, after a's replay advanced the clock.
TEST_F(Eviction, StampInputsFirstStampsARebuiltChainAtItsStart) {
  for (bool first : {false, true}) {
    DtrConfig cfg = saved_;
    cfg.cost = CostModel::Unit;
    cfg.compute_clock = cfg.keep_stamp_on_remat = true;
    cfg.stamp_inputs_first = first;
    pool().configure(cfg);
    Tensor x = randn({16}, {.seed = 3});
    Tensor a = exp(x);
    Tensor b = tanh(a);
    pool().evict(cell_of(b));
    pool().evict(cell_of(a));
    const std::uint64_t start = pool().now();
    Tensor c = exp(b);  // rebuilds a, then b
    EXPECT_TRUE(cell_of(a).resident() && cell_of(b).resident());
    if (first)
      EXPECT_EQ(cell_of(a).last_access(), start);
    else
      EXPECT_GT(cell_of(a).last_access(), start);
  }
}

// On the compute clock (the prototype's rule) a value stamped at this instant scores infinity.
// When it is the only candidate it is still evicted: a poor victim beats OutOfBudget.
TEST_F(Eviction, AVictimScoringInfinityIsStillTakenWhenItIsTheOnlyOne) {
  DtrConfig cfg = saved_;
  cfg.cost = CostModel::Unit;
  cfg.compute_clock = true;
  pool().configure(cfg);
  Tensor x = randn({1024}, {.seed = 4});
  Tensor expected = exp(x);
  Tensor c = exp(x);                // stamped when its compute ends, the clock's now
  pool().evict(cell_of(expected));  // out of the budget's way: only c is a candidate
  pool().set_budget(pool().resident_bytes() + 1024);  // x and c, not a third 4 KiB tensor
  pool().reset_stats();
  Tensor d = tanh(x);  // needs c's room; c was stamped at this instant
  EXPECT_FALSE(cell_of(c).resident());
  EXPECT_EQ(pool().stats().evictions, 1u);
  pool().set_budget(std::nullopt);
  EXPECT_TRUE(bit_equal(c, expected));
}

TEST_F(Eviction, TenThousandDeepChainRematerializesIteratively) {
  Tensor x = randn({16}, {.seed = 2});
  Tensor t = x;
  for (int i = 0; i < 10000; ++i) t = add(mul(t, 0.5), 0.25);
  Tensor expected = clone(t);
  pool().evict(cell_of(t));  // every intermediate was already released by eager eviction
  pool().reset_stats();
  EXPECT_TRUE(bit_equal(t, expected));
  // Each step replays mul, add and the two scalar operands (fill ops, released after the call).
  EXPECT_EQ(pool().stats().rematerializations, 40000u);
}

TEST_F(Eviction, BudgetHoldsAtEveryMomentAndResultsAreBitIdentical) {
  auto program = [] {
    Tensor a = randn({128, 128}, {.seed = 3});
    std::vector<Tensor> keep;
    Tensor h = a;
    for (int i = 0; i < 40; ++i) {
      h = tanh(add(h, mul(a, 0.01 * i)));
      keep.push_back(h);
    }
    Tensor total = zeros({128, 128});
    for (auto& k : keep) total = add(total, sigmoid(k));
    return sum(total);
  };
  pool().set_budget(std::nullopt);
  pool().reset_stats();
  const double expected = program().item<float>();
  const std::size_t peak = pool().stats().peak_resident_bytes;
  for (double fraction : {0.5, 0.3, 0.15}) {
    const auto budget = static_cast<std::size_t>(fraction * static_cast<double>(peak));
    pool().set_budget(budget);
    pool().reset_stats();
    const double got = program().item<float>();
    const DtrStats s = pool().stats();
    EXPECT_EQ(got, expected) << "budget fraction " << fraction;
    EXPECT_LE(s.peak_resident_bytes, budget) << "budget fraction " << fraction;
    EXPECT_GT(s.evictions, 0u);
    EXPECT_GT(s.rematerializations, 0u);
  }
}

TEST_F(Eviction, MultiOutputRecordsRestoreEveryOutput) {
  Tensor x = randn({32, 32}, {.seed = 4});
  auto [values, indices] = max(x, 1);
  Tensor v0 = clone(values), i0 = clone(indices);
  pool().evict(cell_of(values));
  pool().evict(cell_of(indices));
  pool().reset_stats();
  EXPECT_TRUE(bit_equal(values, v0));
  EXPECT_TRUE(cell_of(indices).resident());
  EXPECT_EQ(pool().stats().rematerializations, 1u);
  EXPECT_TRUE(bit_equal(indices, i0));
}

// A rebuild that runs out of budget between a record's outputs leaves the output it gave a
// buffer, but never wrote, evicted: read once the budget allows, it is recomputed, not garbage.
TEST_F(Eviction, AFailedReplayLeavesItsUnwrittenOutputsEvicted) {
  Tensor x = randn({32, 32}, {.seed = 6});
  auto [values, indices] = max(x, 1);  // 32 floats (128 B), then 32 indices (256 B)
  const std::vector<float> v0 = values.to_vector<float>();
  const std::vector<std::int64_t> i0 = indices.to_vector<std::int64_t>();
  pool().evict(cell_of(values));
  pool().evict(cell_of(indices));
  pool().set_budget(pool().resident_bytes() + 200);  // room for the values, not the indices
  EXPECT_THROW((void)values.to_vector<float>(), OutOfBudget);
  EXPECT_FALSE(cell_of(values).resident());
  EXPECT_FALSE(cell_of(indices).resident());
  pool().set_budget(std::nullopt);
  EXPECT_EQ(values.to_vector<float>(), v0);
  EXPECT_EQ(indices.to_vector<std::int64_t>(), i0);
}

TEST_F(Eviction, OutOfBudgetReportsTheNumbersAndThePoolRecovers) {
  Tensor x = randn({256, 256}, {.seed = 5});  // 256 KiB constant
  const std::size_t base = pool().resident_bytes();
  pool().set_budget(base + 100000);
  try {
    Tensor y = exp(x);  // needs another 256 KiB
    FAIL() << "expected OutOfBudget";
  } catch (const OutOfBudget& e) {
    EXPECT_EQ(e.op(), "exp");
    EXPECT_EQ(e.needed(), 262144u);
    EXPECT_EQ(e.budget(), base + 100000);
    EXPECT_GE(e.pinned(), 262144u);
    const std::string m = e.what();
    EXPECT_NE(m.find("exp"), std::string::npos) << m;
    EXPECT_NE(m.find("262144"), std::string::npos) << m;
  }
  EXPECT_EQ(pool().resident_bytes(), base);
  pool().set_budget(base + 300000);
  Tensor y = exp(x);
  pool().set_budget(std::nullopt);
  EXPECT_TRUE(bit_equal(y, exp(x)));
}

// OutOfBudget says what holds the bytes that cannot be evicted, by role, and the smallest
// budget that could let the op run; that budget does.
TEST_F(Eviction, OutOfBudgetBreaksDownWhatCannotBeEvicted) {
  auto layer = std::make_shared<nn::Linear>(256, 256);  // 257 KiB of parameters
  nn::SGD opt(layer->parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor x = randn({64, 256}, {.seed = 3});  // 64 KiB of data
  for (int step = 0; step < 2; ++step) {  // the second update makes the momentum buffers constants
    {
      Tensor loss = sum(layer->forward(x));
      opt.zero_grad();
      backward(loss);
    }
    opt.step();  // gradients and momentum buffers stay resident
  }
  const std::size_t base = pool().resident_bytes();
  pool().set_budget(base + 1000);
  try {
    Tensor y = exp(x);  // needs 64 KiB more
    FAIL() << "expected OutOfBudget";
  } catch (const OutOfBudget& e) {
    const UnevictableBytes& u = e.unevictable();
    EXPECT_EQ(u.parameters, (256u * 256 + 256) * 4);
    EXPECT_EQ(u.gradients, (256u * 256 + 256) * 4);
    EXPECT_EQ(u.optimizer_state, (256u * 256 + 256) * 4);
    EXPECT_GE(u.pinned, 64u * 256 * 4);  // the op's input, x
    EXPECT_EQ(e.smallest_budget(), u.total() + 65536);
    const std::string m = e.what();
    for (const char* part : {"parameters 0.25 MiB", "accumulated gradients 0.25 MiB",
                             "optimizer state 0.25 MiB", "it needs at least"})
      EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' missing from: " << m;
    pool().set_budget(e.smallest_budget());
    EXPECT_NO_THROW(exp(x));
  }
  // Lowering the budget below the constants names them too, not an allocation of 0 bytes.
  try {
    pool().set_budget(1000);
    FAIL() << "expected OutOfBudget";
  } catch (const OutOfBudget& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find("needs 0 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("cannot be evicted"), std::string::npos) << m;
    EXPECT_NE(m.find("the smallest budget that could hold them"), std::string::npos) << m;
  }
}

TEST_F(Eviction, LoweringTheBudgetEvictsAtOnce) {
  Tensor x = tensor<float>(std::vector<float>(4096, 0.5f), Shape{64, 64});  // a 16 KiB constant
  Tensor a = exp(x), b = tanh(x), c = sigmoid(x);
  const std::size_t before = pool().resident_bytes();
  pool().set_budget(before - 2 * 16384);
  EXPECT_LE(pool().resident_bytes(), before - 2 * 16384);
  EXPECT_EQ(pool().stats().evictions, 2u);
  // The constant cannot be evicted: a budget below the resident constants is refused.
  EXPECT_THROW(pool().set_budget(before - 4 * 16384 + 1000), OutOfBudget);
  EXPECT_EQ(pool().budget(), before - 2 * 16384);
}

TEST_F(Eviction, EveryHeuristicAndPolicyComputesTheSameValues) {
  auto program = [] {
    Tensor a = randn({64, 64}, {.seed = 7});
    Tensor h = a;
    std::vector<Tensor> keep;
    for (int i = 0; i < 30; ++i) {
      h = tanh(add(h, a));
      if (i % 3 == 0) keep.push_back(h);
    }
    Tensor total = h;
    for (auto& k : keep) total = add(total, k);
    return sum(total).item<float>();
  };
  pool().set_budget(std::nullopt);
  pool().reset_stats();
  const float expected = program();
  const std::size_t peak = pool().stats().peak_resident_bytes;
  for (Heuristic h : all_heuristics()) {
    for (DeallocPolicy p :
         {DeallocPolicy::EagerEvict, DeallocPolicy::Banish, DeallocPolicy::Ignore}) {
      DtrConfig cfg;
      cfg.heuristic = h;
      cfg.policy = p;
      cfg.cost = CostModel::Unit;
      pool().configure(cfg);
      // Banishing a released temporary makes every cell computed from it unevictable: in this
      // program nothing can then be evicted, so banish runs at the unbudgeted peak.
      const std::size_t budget = p == DeallocPolicy::Banish ? peak : peak * 4 / 10;
      pool().set_budget(budget);
      pool().reset_stats();
      EXPECT_EQ(program(), expected) << heuristic_name(h) << " / " << policy_name(p);
      EXPECT_LE(pool().stats().peak_resident_bytes, budget);
    }
  }
}

TEST(BudgetParser, AcceptsBytesUnitsFractionsAndNone) {
  EXPECT_EQ(parse_budget("123456").bytes, 123456u);
  EXPECT_EQ(parse_budget("300MiB").bytes, 300u * 1024 * 1024);
  EXPECT_EQ(parse_budget("1.5GB").bytes, 1500000000u);
  EXPECT_EQ(parse_budget("64 KiB").bytes, 65536u);
  EXPECT_DOUBLE_EQ(*parse_budget("0.4").fraction, 0.4);
  EXPECT_DOUBLE_EQ(*parse_budget("1.0").fraction, 1.0);
  EXPECT_TRUE(parse_budget("none").none());
  EXPECT_EQ(parse_budget("0.4").resolve(1000), 400u);
  for (const char* bad : {"", "abc", "-5", "1.5", "12XB", "0"}) {
    EXPECT_THROW(parse_budget(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace remat
