// REMAT_TEST_BUDGET=BYTES runs every test of a binary under that memory budget, evicting every
// evictable cell after each op call (the ops suite is registered a second time so,
// tests/CMakeLists.txt): every value read again is recomputed, and must equal what the first
// run computed, so an op whose replay differs fails its PyTorch comparison.  The environment
// reports how much was evicted and recomputed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "dtr/config.h"
#include "dtr/pool.h"

namespace remat::testing {
namespace {

class BudgetEnvironment final : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* text = std::getenv("REMAT_TEST_BUDGET");
    if (!text) return;
    DtrConfig cfg;
    cfg.budget = parse_budget(text).bytes;
    cfg.cost = CostModel::Flops;  // deterministic choices
    cfg.evict_after_every_op = true;
    Pool::of(Device::cpu()).configure(cfg);
  }
  void TearDown() override {
    if (!std::getenv("REMAT_TEST_BUDGET")) return;
    const DtrStats s = Pool::of(Device::cpu()).total_stats();
    std::printf("under REMAT_TEST_BUDGET=%s: %llu evictions, %llu rematerializations\n",
                std::getenv("REMAT_TEST_BUDGET"), static_cast<unsigned long long>(s.evictions),
                static_cast<unsigned long long>(s.rematerializations));
  }
};

const auto* const kRegistered = ::testing::AddGlobalTestEnvironment(new BudgetEnvironment);

}  // namespace
}  // namespace remat::testing
