// dtr-next against dtr-eq on a hand-sized program where staleness picks the wrong victim: q is
// staler than p but read sooner.  dtr-next, having seen the program as the last step, evicts p
// and rematerializes once; dtr-eq evicts q and rematerializes twice.  When the last step
// called other ops, dtr-next is exactly dtr-eq.
#include "sim/read.h"
#include "sim/runs.h"
#include "support/sim_log.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

using testing::log_call;
using testing::log_release;

// A log's first lines: START and the constant x (1 KiB).
std::string start_with_x() {
  return testing::log_start() + testing::log_constant("x", 1024);
}

// x (constant, 1 KiB); q = f(x); p = f(x); r = g(p), small; s = f(x) must evict q or p;
// t = g(q, s); u = g(p).  `second_op` names the second call (another name: a diverged step).
Program program(const std::string& second_op = "f") {
  std::string text = start_with_x();
  text += log_call("f", "q", {"x"}, 1024) + log_call(second_op, "p", {"x"}, 1024) +
          log_call("g", "r", {"p"}, 4) + log_release("r") + log_call("f", "s", {"x"}, 1024) +
          log_call("g", "t", {"q", "s"}, 4) + log_release("t") + log_call("g", "u", {"p"}, 4) +
          log_release("u") + log_release("q") + log_release("p") + log_release("s");
  return parse_program(text, "next.log");
}

ReplayOptions options(Heuristic h) {
  ReplayOptions o;
  o.heuristic = h;
  o.cost = CostModel::Unit;
  o.budget = 3 * 1024 + 256;
  return o;
}

TEST(NextUse, EvictsTheValueReadLatest) {
  const Program p = program();
  const ReplayResult eq = replay(p, options(Heuristic::DtrEq));
  const ReplayResult next = replay(p, options(Heuristic::DtrNext));
  ASSERT_EQ(eq.status, ReplayStatus::Ok) << eq.message;
  ASSERT_EQ(next.status, ReplayStatus::Ok) << next.message;
  EXPECT_EQ(eq.rematerializations, 2u);
  EXPECT_EQ(next.rematerializations, 1u);
  EXPECT_EQ(next.compute, 7.0);  // six calls and one replay
  // Deterministic.
  EXPECT_EQ(replay(p, options(Heuristic::DtrNext)).compute, next.compute);
}

TEST(NextUse, ADivergedStepFallsBackToDtrEq) {
  const Program measured = program();
  const ReplayResult eq = replay(measured, options(Heuristic::DtrEq));
  // The last step called another op second: no prediction from there on.
  const ReplayResult next = replay_after(program("h"), measured, options(Heuristic::DtrNext));
  ASSERT_EQ(next.status, ReplayStatus::Ok) << next.message;
  EXPECT_EQ(next.rematerializations, eq.rematerializations);
  EXPECT_EQ(next.evictions, eq.evictions);
  EXPECT_EQ(next.compute, eq.compute);
}

// x (constant); a = f(x), b = f(a), both small; l = f(b); v = f(x); w = f(x) must evict l or v;
// a and b are then released; w, v and l are read in that order.  Belady's rule alone evicts l,
// read latest, but by then a and b are gone, and l's rebuild rebuilds them too (3 calls);
// evicting v costs one.
Program gone_inputs() {
  std::string text = start_with_x();
  text += log_call("f", "a", {"x"}, 64) + log_call("f", "b", {"a"}, 64) +
          log_call("f", "l", {"b"}, 1024) + log_call("f", "v", {"x"}, 1024) +
          log_call("f", "w", {"x"}, 1024) + log_release("a") + log_release("b") +
          log_call("h", "o1", {"w"}, 4) + log_release("o1") + log_release("w") +
          log_call("h", "o2", {"v"}, 4) + log_release("o2") + log_call("h", "o3", {"l"}, 4) +
          log_release("o3") + log_release("l") + log_release("v");
  return parse_program(text, "gone.log");
}

TEST(NextUse, KeepsAValueWhoseInputsAreGoneByItsNextUse) {
  ReplayOptions o = options(Heuristic::DtrNext);
  o.budget = 1024 + 2 * 64 + 2 * 1024 + 200;  // x, a, b and two of l, v, w
  const ReplayResult next = replay(gone_inputs(), o);
  ASSERT_EQ(next.status, ReplayStatus::Ok) << next.message;
  EXPECT_EQ(next.rematerializations, 1u) << "v rebuilt, not l with a and b";
  EXPECT_EQ(next.compute, 9.0);  // eight calls and one replay
}

// x (constant); a = f(x); b = f(a); c = f(x) evicts b, read after a; a is read; d = f(x) must
// evict a or c; b, c and, ten calls later, a are read.  a's own next read is last, so Belady's
// rule alone evicts it (as did dtr-eq's neighbourhood over that distance: 3 rebuilds, a with
// b, then c), but b, evicted and read next, is rebuilt from a: a is needed first.  Evicting c
// instead rebuilds b and c once each.
Program needed_by_evicted() {
  std::string text = start_with_x();
  text += log_call("f", "a", {"x"}, 1024) + log_call("f", "b", {"a"}, 1024) +
          log_call("f", "c", {"x"}, 1024) + log_call("h", "o1", {"a"}, 4) + log_release("o1") +
          log_call("f", "d", {"x"}, 1024) + log_release("d") + log_call("h", "o2", {"b"}, 4) +
          log_release("o2") + log_release("b") + log_call("h", "o3", {"c"}, 4) + log_release("o3") +
          log_release("c");
  for (int i = 0; i < 10; ++i)  // a's own read comes much later
    text += log_call("h", "k" + std::to_string(i), {"x"}, 4) + log_release("k" + std::to_string(i));
  text += log_call("h", "o4", {"a"}, 4) + log_release("o4") + log_release("a");
  return parse_program(text, "needed.log");
}

TEST(NextUse, KeepsAValueAnEvictedDependentNeedsFirst) {
  ReplayOptions o = options(Heuristic::DtrNext);
  o.budget = 1024 + 2 * 1024 + 200;  // x and two of a, b, c, d
  const ReplayResult next = replay(needed_by_evicted(), o);
  ASSERT_EQ(next.status, ReplayStatus::Ok) << next.message;
  EXPECT_EQ(next.rematerializations, 2u) << "b and c rebuilt, not a as well";
  EXPECT_EQ(next.compute, 20.0);  // eighteen calls and two replays
}

}  // namespace
}  // namespace remat::sim
