// The research prototype's eight logs (../shared/data/dtr-prototype-logs/logs.zip, never copied
// into the repository) parse and replay: unbudgeted with no eviction and the summed compute, and
// under a budget within the thrash limit for the default heuristic.  Skipped, with a message,
// where the shared data is missing; REMAT_SHARED_DATA points elsewhere.
#include <cstdlib>
#include <filesystem>

#include "sim/read.h"
#include "sim/runs.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

std::filesystem::path shared_data() {
  if (const char* env = std::getenv("REMAT_SHARED_DATA")) return env;
  // tests/fixtures/data -> the repository -> its sibling shared/data
  return std::filesystem::path(REMAT_FIXTURE_DIR) / ".." / ".." / ".." / ".." / "shared" / "data";
}

// The eight logs, parsed once for all tests; empty when the shared data is missing.
const std::vector<Program>& logs() {
  static const std::vector<Program> programs = [] {
    const auto zip = shared_data() / "dtr-prototype-logs" / "logs.zip";
    return std::filesystem::exists(zip) ? read_programs(zip.string()) : std::vector<Program>{};
  }();
  return programs;
}

#define SKIP_WITHOUT_LOGS()                                                                      \
  if (logs().empty())                                                                            \
  GTEST_SKIP() << "no prototype logs at " << (shared_data() / "dtr-prototype-logs" / "logs.zip") \
               << " (set REMAT_SHARED_DATA)"

TEST(PrototypeLogs, EveryLogParsesAndReplays) {
  SKIP_WITHOUT_LOGS();
  const std::vector<Program>& programs = logs();
  ASSERT_EQ(programs.size(), 8u);
  for (const Program& p : programs) {
    SCOPED_TRACE(p.source);
    EXPECT_EQ(p.origin, Origin::PrototypeLog);
    RunOptions o;
    o.cost = CostModel::Time;
    const Baseline base = baseline(p, o);
    // Unbudgeted: nothing is evicted or recomputed, so the compute is every op's recorded time.
    EXPECT_DOUBLE_EQ(base.compute, total_cost(p, CostModel::Time));
    std::size_t largest = 0;
    for (const auto& t : p.tensors) largest = std::max(largest, t.bytes);
    EXPECT_GE(base.peak_bytes, largest);
    const RunRow unbudgeted = run(p, base, o, parse_budget("1.0"));
    EXPECT_EQ(unbudgeted.result.evictions, 0u);
    EXPECT_EQ(unbudgeted.overhead.value_or(0), 1.0);
    // At 0.8 of the peak the default heuristic must fit and stay within the limit.
    const RunRow tight = run(p, base, o, parse_budget("0.8"));
    EXPECT_EQ(tight.result.status, ReplayStatus::Ok) << tight.result.message;
    EXPECT_LE(tight.result.peak_bytes, *tight.budget_bytes);
    EXPECT_GE(tight.overhead.value_or(0), 1.0);
  }
}

TEST(PrototypeLogs, ReplaysAreDeterministic) {
  // Costs come from the log, never from timing the replay's empty kernels: the same run twice,
  // also in one process after other runs, makes the same choices.
  SKIP_WITHOUT_LOGS();
  for (const Program& p : logs()) {
    if (p.source.find("lstm") == std::string::npos) continue;
    RunOptions o;
    const Baseline base = baseline(p, o);
    for (Heuristic h : {Heuristic::Msps, Heuristic::DtrLocal}) {
      o.heuristic = h;
      const RunRow a = run(p, base, o, parse_budget("0.5"));
      const RunRow b = run(p, base, o, parse_budget("0.5"));
      ASSERT_GT(a.result.evictions, 0u);
      EXPECT_EQ(a.result.evictions, b.result.evictions) << heuristic_name(h);
      EXPECT_EQ(a.result.rematerializations, b.result.rematerializations) << heuristic_name(h);
      EXPECT_EQ(a.result.compute, b.result.compute) << heuristic_name(h);
    }
  }
}

// dtr-next gives its two scores and dtr-eq's a trial step each, then keeps the one that
// recomputed least (dtr/score_choice.h): on a log that repeats, it never recomputes more than
// dtr-eq, and recomputes less somewhere at each of these budgets.
TEST(PrototypeLogs, DtrNextNeverRecomputesMoreThanDtrEq) {
  SKIP_WITHOUT_LOGS();
  for (const char* fraction : {"0.3", "0.5", "0.7"}) {
    int less = 0;
    for (const Program& p : logs()) {
      SCOPED_TRACE(p.source + " at " + fraction);
      RunOptions o;
      o.cost = CostModel::Time;
      const Baseline base = baseline(p, o);
      o.heuristic = Heuristic::DtrEq;
      const RunRow eq = run(p, base, o, parse_budget(fraction));
      o.heuristic = Heuristic::DtrNext;
      const RunRow next = run(p, base, o, parse_budget(fraction));
      if (eq.result.status != ReplayStatus::Ok) continue;
      ASSERT_EQ(next.result.status, ReplayStatus::Ok) << next.result.message;
      EXPECT_LE(next.result.recompute, eq.result.recompute * (1 + 1e-12));
      if (next.result.recompute < eq.result.recompute * 0.99) ++less;
    }
    EXPECT_GT(less, 0);
  }
}

// The Unrolled GAN at 0.3 of its peak, where dtr-eq thrashes: the ancestors a rebuild would
// redo are long chains there, and dtr-next must still find victims (it ran out of them,
// OutOfBudget, when such chains scored infinity) and recompute less than the exact dtr.
TEST(PrototypeLogs, DtrNextRunsTheUnrolledGanAtThreeTenths) {
  SKIP_WITHOUT_LOGS();
  for (const Program& p : logs()) {
    if (p.source.find("unroll_gan") == std::string::npos) continue;
    RunOptions o;
    o.cost = CostModel::Time;
    const Baseline base = baseline(p, o);
    o.heuristic = Heuristic::Dtr;
    const RunRow dtr = run(p, base, o, parse_budget("0.3"));
    o.heuristic = Heuristic::DtrNext;
    const RunRow next = run(p, base, o, parse_budget("0.3"));
    ASSERT_EQ(dtr.result.status, ReplayStatus::Ok) << dtr.result.message;
    ASSERT_EQ(next.result.status, ReplayStatus::Ok) << next.result.message;
    EXPECT_LT(next.result.recompute, dtr.result.recompute);
    return;
  }
  FAIL() << "no unroll_gan log among the eight";
}

}  // namespace
}  // namespace remat::sim
