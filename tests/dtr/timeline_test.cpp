// The pool's timeline: one sample per recorded op call (views make none, in-place writes one),
// each holding the resident bytes Pool::resident_bytes() gives right after the call, and the
// eviction and rematerialization counters since start_timeline; nothing is recorded when off.
#include "dtr/pool.h"
#include "nn/nn.h"
#include "support/test_util.h"

namespace remat {
namespace {

class Timeline : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = pool().config(); }
  void TearDown() override {
    pool().stop_timeline();
    pool().configure(saved_);
  }
  static Pool& pool() { return Pool::of(Device::cpu()); }
  DtrConfig saved_;
};

TEST_F(Timeline, OneSamplePerCallWithTheResidentBytesAfterIt) {
  pool().reset_stats();
  pool().start_timeline();
  ASSERT_TRUE(pool().timeline_active());
  std::size_t expected_samples = 0;
  // Each step is one recorded call whose operands stay alive, so nothing is freed after it.
  auto check = [&](const char* what, std::size_t calls, std::string_view op) {
    expected_samples += calls;
    const auto& t = pool().timeline();
    ASSERT_EQ(t.size(), expected_samples) << what;
    EXPECT_EQ(t.back().call, expected_samples - 1) << what;
    EXPECT_EQ(t.back().resident_bytes, pool().resident_bytes()) << what;
    if (!op.empty()) {
      EXPECT_EQ(t.back().op, op) << what;
    }
  };
  Tensor a = randn({64, 64}, {.seed = 1});
  check("randn", 1, "normal");
  Tensor b = exp(a);
  check("exp", 1, "exp");
  Tensor c = add(a, b);
  check("add", 1, "add");
  Tensor v = slice(transpose(reshape(c, {32, 128}), 0, 1), 0, 0, 64);  // views: no call
  check("views", 0, "");
  Tensor d = matmul(a, b);
  check("matmul", 1, "");
  add_(d, c);  // in place: one write
  check("add_", 1, "");
  const DtrStats s = pool().stats();
  const std::vector<TimelineSample> samples = pool().stop_timeline();
  EXPECT_FALSE(pool().timeline_active());
  EXPECT_TRUE(pool().timeline().empty());
  EXPECT_EQ(samples.size(), s.calls);
  for (std::size_t i = 0; i < samples.size(); ++i) EXPECT_EQ(samples[i].call, i);
  // Every buffer made here is still held: resident bytes only grew, by the outputs' sizes.
  EXPECT_EQ(samples[2].resident_bytes - samples[1].resident_bytes, 64u * 64u * sizeof(float));
  EXPECT_EQ(samples.back().evictions, s.evictions);
  EXPECT_EQ(samples.back().rematerializations, s.rematerializations);
}

TEST_F(Timeline, CountersRiseWithEvictionsAndRematerializationsUnderABudget) {
  auto program = [] {
    Tensor a = randn({128, 128}, {.seed = 3});
    std::vector<Tensor> keep;
    Tensor h = a;
    for (int i = 0; i < 30; ++i) {
      h = tanh(add(h, a));
      keep.push_back(h);
    }
    Tensor total = zeros({128, 128});
    for (auto& k : keep) total = add(total, sigmoid(k));
    return sum(total);
  };
  pool().set_budget(std::nullopt);
  pool().reset_stats();
  pool().start_timeline();
  program();
  const std::vector<TimelineSample> unbudgeted = pool().stop_timeline();
  const std::size_t peak = pool().stats().peak_resident_bytes;
  EXPECT_EQ(unbudgeted.back().evictions, 0u);

  const auto budget = static_cast<std::size_t>(0.3 * static_cast<double>(peak));
  pool().set_budget(budget);
  pool().reset_stats();
  pool().start_timeline();
  program();
  const DtrStats s = pool().stats();
  const std::vector<TimelineSample> t = pool().stop_timeline();
  ASSERT_EQ(t.size(), s.calls);
  ASSERT_EQ(t.size(), unbudgeted.size());  // the same calls, whatever the budget
  ASSERT_GT(s.evictions, 0u);
  ASSERT_GT(s.rematerializations, 0u);
  EXPECT_EQ(t.back().evictions, s.evictions);
  EXPECT_EQ(t.back().rematerializations, s.rematerializations);
  std::size_t calls_that_evicted = 0, calls_that_rematerialized = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].op, unbudgeted[i].op) << "call " << i;
    EXPECT_LE(t[i].resident_bytes, budget) << "call " << i << " " << t[i].op;
    if (i == 0) continue;
    EXPECT_GE(t[i].evictions, t[i - 1].evictions) << "call " << i;
    EXPECT_GE(t[i].rematerializations, t[i - 1].rematerializations) << "call " << i;
    calls_that_evicted += t[i].evictions > t[i - 1].evictions;
    calls_that_rematerialized += t[i].rematerializations > t[i - 1].rematerializations;
  }
  EXPECT_GT(calls_that_evicted, 0u);
  EXPECT_GT(calls_that_rematerialized, 0u);
  pool().set_budget(std::nullopt);
}

TEST_F(Timeline, OffRecordsNothingAndStartDropsOldSamples) {
  Tensor a = randn({16}, {.seed = 5});
  Tensor b = exp(a);
  EXPECT_FALSE(pool().timeline_active());
  EXPECT_TRUE(pool().timeline().empty());
  EXPECT_TRUE(pool().stop_timeline().empty());
  pool().start_timeline();
  Tensor c = exp(b);
  EXPECT_EQ(pool().timeline().size(), 1u);
  pool().start_timeline();  // starts over
  EXPECT_TRUE(pool().timeline().empty());
  Tensor d = exp(c);
  const auto t = pool().stop_timeline();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].call, 0u);
  Tensor e = exp(d);
  EXPECT_TRUE(pool().timeline().empty());
}

}  // namespace
}  // namespace remat
