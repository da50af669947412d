// The per-cell cache of walks up through evicted ancestors (Heuristics::evicted_ancestors_cost,
// msps and dtr-next): after any sequence of evictions, rematerializations and in-place writes,
// every resident candidate's cached cost equals the cost of its evicted ancestors counted
// afresh from the records.  And dtr-next's kept next reads (Heuristics::next_use) equal a
// lookup in the last step's log at every call.
#include <random>
#include <set>

#include "dtr/heuristics.h"
#include "dtr/pool.h"
#include "nn/nn.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::cell_of;

// The distinct evicted ancestors reached through evicted cells, summed (flops are whole
// numbers, so the order of the sum does not matter).
double fresh_ancestors_cost(const Cell& cell) {
  std::set<const Cell*> seen;
  std::vector<const Cell*> stack{&cell};
  double cost = 0;
  while (!stack.empty()) {
    const Cell* c = stack.back();
    stack.pop_back();
    for (const auto& in : c->record()->inputs) {
      if (in->state() != CellState::Evicted || !in->record() || !seen.insert(in.get()).second)
        continue;
      cost += in->record()->cost(CostModel::Flops);
      stack.push_back(in.get());
    }
  }
  return cost;
}

class WalkCache : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = pool().config(); }
  void TearDown() override { pool().configure(saved_); }
  static Pool& pool() { return Pool::of(Device::cpu()); }
  // dtr-next, counting flops.
  void predict() {
    DtrConfig cfg = saved_;
    cfg.heuristic = Heuristic::DtrNext;
    cfg.cost = CostModel::Flops;
    pool().configure(cfg);
  }
  // Value `i` of a random program: a sum or a product of two earlier values.
  static void append_value(std::vector<Tensor>& values, std::mt19937& rng, int i) {
    const Tensor& a = values[rng() % values.size()];
    const Tensor& b = values[rng() % values.size()];
    values.push_back(i % 2 ? a + b : matmul(a, b));
  }
  DtrConfig saved_;
};

TEST_F(WalkCache, CachedAncestorCostsMatchAFreshCountAfterEveryChange) {
  DtrConfig cfg = saved_;
  cfg.heuristic = Heuristic::Msps;
  cfg.cost = CostModel::Flops;
  pool().configure(cfg);
  // A graph with shared ancestors: each value reads one or two earlier ones.
  std::mt19937 rng(7);
  std::vector<Tensor> values{randn({8, 8}, {.seed = 1})};
  for (int i = 1; i < 40; ++i) {
    const Tensor& a = values[rng() % values.size()];
    const Tensor& b = values[rng() % values.size()];
    values.push_back(i % 3 == 0 ? tanh(a) : (i % 3 == 1 ? a + b : matmul(a, b)));
  }
  int checked = 0, nonzero = 0;
  for (int action = 0; action < 1200; ++action) {
    Tensor& t = values[1 + rng() % (values.size() - 1)];
    Cell& c = cell_of(t);
    const unsigned kind = rng() % 8;
    if (kind == 0) {
      add_(t, 1.0);  // an in-place write: readers are rewired to a copy of the old value
    } else if (c.resident() && c.replayable() && c.pins() == 0) {
      if (kind < 6) pool().evict(c);
    } else if (!c.resident()) {
      pool().ensure_resident(c);  // rematerializes it and the evicted ancestors it needs
    }
    // Often several changes come between two searches (Pool::invalidate_walks then stops
    // where an earlier pass since the last kept walk went down).
    if (rng() % 3 != 0) continue;
    for (const Tensor& v : values) {
      Cell& r = cell_of(v);
      if (!r.resident() || !r.replayable()) continue;
      const double expected = fresh_ancestors_cost(r);
      // Sometimes a walk stopped early by a bound comes first: its partial sum is kept as a
      // lower bound only.
      if (expected > 0 && rng() % 2) {
        EXPECT_EQ(Heuristics::evicted_ancestors_cost(pool(), r, expected / 2),
                  std::numeric_limits<double>::infinity());
      }
      // Asked twice: the second answer comes from the cache.
      for (int ask = 0; ask < 2; ++ask) {
        ASSERT_EQ(
            Heuristics::evicted_ancestors_cost(pool(), r, std::numeric_limits<double>::infinity()),
            expected)
            << "action " << action << ", cell " << r.id();
      }
      // A bound below the cost is reported as passed; one above it, as the cost.
      if (expected > 0) {
        ++nonzero;
        EXPECT_EQ(Heuristics::evicted_ancestors_cost(pool(), r, expected / 2),
                  std::numeric_limits<double>::infinity());
        EXPECT_EQ(Heuristics::evicted_ancestors_cost(pool(), r, expected), expected);
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(nonzero, 100);  // the walks reached evicted ancestors often
}

TEST_F(WalkCache, KeptNextReadsMatchTheLogAtEveryCall) {
  predict();
  constexpr double kNoGoneLimit = std::numeric_limits<double>::infinity();
  const Tensor x = randn({8, 8}, {.seed = 1});
  int predicted = 0, unpredicted = 0;
  for (int step = 0; step < 2; ++step) {
    pool().end_step();
    std::mt19937 rng(11);  // the same program in both steps: the second is predicted
    std::vector<Tensor> values{tanh(x)};
    for (int i = 1; i < 60; ++i) {
      append_value(values, rng, i);
      if (step == 0) continue;
      // The calls made so far in this step.
      const std::uint32_t now = cell_of(values.back()).record()->step_call + 1;
      for (const Tensor& v : values) {
        const Cell& c = cell_of(v);
        const auto read =
            pool().last_step_log().next_use(c.record()->step_call, c.output_index(), now);
        // Asked twice: the second answer is the kept one.
        for (int ask = 0; ask < 2; ++ask) {
          const double distance = Heuristics::next_use(pool(), c, kNoGoneLimit, 0).distance;
          if (read) {
            ASSERT_EQ(distance, static_cast<double>(*read - now + 1))
                << "call " << now << ", cell " << c.id();
          } else {
            ASSERT_GE(distance, 2.0);  // staleness in calls, counted double
          }
        }
        ++(read ? predicted : unpredicted);
      }
    }
  }
  EXPECT_GT(predicted, 300);
  EXPECT_GT(unpredicted, 300);
}

// dtr-next's floors (Heuristics::next_parts) before the gone ancestors are walked are no greater
// than the floors once they are (complete_parts), and a completed floor is the one asked for
// again, now kept: the floor order of a search takes the same cells as if every floor were
// exact from the start.
TEST_F(WalkCache, FloorsBeforeTheGoneWalkBoundTheFloorsAfterIt) {
  predict();
  const Tensor x = randn({8, 8}, {.seed = 1});
  int lazy = 0, lazy_with_gone = 0, fell_back = 0;
  for (int step = 0; step < 2; ++step) {
    pool().end_step();
    std::mt19937 rng(13);  // the same program in both steps: the second is predicted
    std::vector<Tensor> values{tanh(x)};
    for (int i = 1; i < 60; ++i) {
      append_value(values, rng, i);
      // An in-place write drops the kept gone costs of every cell, also of cells read long
      // ago: their floors stand on their staleness too.
      if (i % 8 == 0) add_(tanh(x), 1.0);
      if (step == 0) continue;
      for (const Tensor& v : values) {
        Cell& c = cell_of(v);
        const Heuristics::NextParts first = Heuristics::next_parts(pool(), c);
        if (first.exact) continue;
        ++lazy;
        Heuristics::NextParts completed = first;
        Heuristics::complete_parts(pool(), c, completed);
        ASSERT_TRUE(completed.exact);
        ASSERT_LE(first.floor, completed.floor) << "cell " << c.id();
        const Heuristics::NextParts again = Heuristics::next_parts(pool(), c);
        ASSERT_TRUE(again.exact);
        EXPECT_EQ(again.floor, completed.floor);
        EXPECT_EQ(again.distance, completed.distance);
        EXPECT_EQ(again.gone_cost, completed.gone_cost);
        lazy_with_gone += completed.gone_cost > 0;
        // Gone ancestors costing more than the cell: the distance is its staleness.
        fell_back += completed.gone_cost > c.record()->cost(CostModel::Flops);
      }
    }
  }
  EXPECT_GT(lazy, 100);
  EXPECT_GT(lazy_with_gone, 50);
  EXPECT_GT(fell_back, 40);
}

}  // namespace
}  // namespace remat
