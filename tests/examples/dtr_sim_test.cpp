// dtr_sim run as a user runs it: --lower-bound adds a "bound" row at or below the optimum (exact
// on dtr_chain's program) and every heuristic, and names the stage when no schedule fits.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_util.h"

namespace remat {
namespace {

const std::string kSim = std::string(REMAT_EXAMPLES_DIR) + "/../tools/dtr_sim";

// The JSON rows of one run, by heuristic (or reference) name.
std::map<std::string, nlohmann::json> rows_of(const std::string& args) {
  const testing::CommandResult r = testing::run_command(kSim + " --json " + args + " 2>/dev/null");
  if (r.status != 0)
    throw Error(fmt::format("dtr_sim {} failed ({}):\n{}", args, r.status, r.output));
  std::map<std::string, nlohmann::json> rows;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.front() != '{') continue;
    const auto j = nlohmann::json::parse(line);
    rows[j.at("heuristic").get<std::string>()] = j;
  }
  return rows;
}

TEST(DtrSimLowerBound, BelowTheOptimumAndEveryHeuristicOnAChain) {
  if (!std::filesystem::exists(kSim)) GTEST_SKIP() << "dtr_sim is not built";
  auto rows =
      rows_of("--lower-bound --optimal --cost unit --heuristic dtr-eq,msps --budget 0.3 chain:32");
  ASSERT_TRUE(rows.count("bound") && rows.count("optimal")) << "rows missing";
  const double bound = rows["bound"].at("overhead").get<double>();
  EXPECT_GT(bound, 1.0);  // the budget binds
  EXPECT_LE(bound, rows["optimal"].at("overhead").get<double>() + 1e-9);
  for (const char* h : {"dtr-eq", "msps"}) {
    ASSERT_TRUE(rows.count(h)) << h;
    if (rows[h].at("status") == "ok") {
      EXPECT_LE(bound, rows[h].at("overhead").get<double>() + 1e-9) << h;
    }
  }
}

TEST(DtrSimLowerBound, NamesTheStageNoScheduleFits) {
  if (!std::filesystem::exists(kSim)) GTEST_SKIP() << "dtr_sim is not built";
  auto rows = rows_of("--lower-bound --cost unit --budget 0.1 chain:32");
  ASSERT_TRUE(rows.count("bound"));
  EXPECT_EQ(rows["bound"].at("status"), "infeasible");
  EXPECT_NE(rows["bound"].at("note").get<std::string>().find("no schedule fits: stage"),
            std::string::npos)
      << rows["bound"].dump();
  EXPECT_EQ(rows["dtr-eq"].at("status"), "infeasible");
}

}  // namespace
}  // namespace remat
