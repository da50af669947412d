// A traced write (WRITE, Cell::mark_mutated) replays in the simulator: readers of the old value
// keep a copy, made on the accounting allocator without touching memory it does not hold, and
// a write to a value evicted under the budget first brings it back.
#include "sim/read.h"
#include "sim/runs.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

std::string call(const std::string& out, const std::string& arg) {
  return fmt::format(
      R"({{"INSTRUCTION":"CALL","NAME":"f","ARGS":["{1}"],"RESULT":["{0}"],"TIME":"1000"}})"
      "\n"
      R"({{"INSTRUCTION":"MEMORY","NAME":"{0}","MEMORY":"4096"}})"
      "\n"
      R"({{"INSTRUCTION":"ALIAS","NAME":"{0}","ALIAS":"-1"}})"
      "\n",
      out, arg);
}

TEST(TracedWrite, AWriteUnderLiveReadersReplaysAtEveryBudget) {
  // a is read by b, then written while b lives; c..f push a out under a budget first.
  std::string text = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"x"}
{"INSTRUCTION":"MEMORY","NAME":"x","MEMORY":"4096"}
)";
  text += call("a", "x") + call("b", "a") + call("c", "b") + call("d", "c") + call("e", "d") +
          call("f", "e");
  text += R"({"INSTRUCTION":"WRITE","NAME":"a"}
{"INSTRUCTION":"ACCESS","NAME":"b"}
)";
  const Program p = parse_program(text, "write.log");
  RunOptions o;
  o.cost = CostModel::Unit;
  const Baseline base = baseline(p, o);
  // Unbudgeted, the copy for b is made on the accounting allocator (which holds no bytes: a
  // memcpy there crashed).
  EXPECT_EQ(run(p, base, o, parse_budget("1.0")).result.status, ReplayStatus::Ok);
  // Under budgets a is evicted before the write and rebuilt for it; the frozen readers may then
  // leave too little to evict, which must be reported, not crash.
  for (const char* budget : {"0.8", "0.7", "0.6"}) {
    const RunRow r = run(p, base, o, parse_budget(budget));
    EXPECT_GT(r.result.evictions, 0u) << budget;
    if (r.result.status != ReplayStatus::Ok) {
      EXPECT_EQ(r.result.status, ReplayStatus::Infeasible) << budget;
      EXPECT_NE(r.result.message.find("OutOfBudget"), std::string::npos) << r.result.message;
    }
  }
}

}  // namespace
}  // namespace remat::sim
