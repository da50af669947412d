// The paper's sqrt(N) bound, on the dtr_chain demo: with |e*| as the heuristic and unit costs,
// a budget of ceil(2 sqrt(N)) tensors keeps executions per op bounded as N grows 16-fold, while
// LRU at the same budget needs clearly more.  Runs the example program and reads its JSON line.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/test_util.h"

namespace remat {
namespace {

nlohmann::json run_chain(std::int64_t n, const std::string& heuristic) {
  const auto budget = static_cast<std::int64_t>(std::ceil(2 * std::sqrt(static_cast<double>(n))));
  const std::string cmd = fmt::format("{}/dtr_chain --length {} --budget-tensors {} --heuristic {}",
                                      REMAT_EXAMPLES_DIR, n, budget, heuristic);
  std::FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw Error("cannot run " + cmd);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) out = buf;  // the last line
  const int rc = pclose(pipe);
  if (rc != 0) throw Error(fmt::format("{} exited with {}", cmd, rc));
  return nlohmann::json::parse(out);
}

bool demo_built() { return std::filesystem::exists(std::string(REMAT_EXAMPLES_DIR) + "/dtr_chain"); }

TEST(ChainBound, EStarStaysLinearWhileLruGrows) {
  if (!demo_built()) GTEST_SKIP() << "examples are not built (REMAT_BUILD_EXAMPLES=OFF)";
  const auto e256 = run_chain(256, "estar"), e4096 = run_chain(4096, "estar");
  const auto l256 = run_chain(256, "lru"), l4096 = run_chain(4096, "lru");
  const double estar_growth = e4096["executions_per_op"].get<double>() / e256["executions_per_op"].get<double>();
  const double lru_growth = l4096["executions_per_op"].get<double>() / l256["executions_per_op"].get<double>();
  std::printf("executions per op, N=256 -> 4096 at budget ceil(2 sqrt N): estar %.3f -> %.3f (x%.2f), "
              "lru %.3f -> %.3f (x%.2f)\n",
              e256["executions_per_op"].get<double>(), e4096["executions_per_op"].get<double>(), estar_growth,
              l256["executions_per_op"].get<double>(), l4096["executions_per_op"].get<double>(), lru_growth);
  EXPECT_LE(estar_growth, 1.5);
  EXPECT_GE(lru_growth, 2.0);
  EXPECT_GE(lru_growth, 1.5 * estar_growth);
  for (const auto* r : {&e256, &e4096, &l256, &l4096}) {
    EXPECT_LE((*r)["peak_resident_tensors"].get<double>(), (*r)["budget_tensors"].get<double>());
    EXPECT_TRUE((*r)["gradient_ok"].get<bool>());
  }
}

TEST(ChainBound, TooSmallABudgetIsAClearErrorNotAHang) {
  if (!demo_built()) GTEST_SKIP() << "examples are not built (REMAT_BUILD_EXAMPLES=OFF)";
  const std::string cmd = fmt::format("{}/dtr_chain --length 100 --budget-tensors 2 2>&1", REMAT_EXAMPLES_DIR);
  std::FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_TRUE(pipe);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  EXPECT_NE(pclose(pipe), 0);
  EXPECT_NE(out.find("too small"), std::string::npos) << out;
  EXPECT_NE(out.find("OutOfBudget"), std::string::npos) << out;
}

}  // namespace
}  // namespace remat
