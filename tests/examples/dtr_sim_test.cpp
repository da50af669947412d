// dtr_sim run as a user runs it: --lower-bound adds a "bound" row at or below the optimum (exact
// on dtr_chain's program) and every heuristic, and names the stage when no schedule fits; a
// trace of train_resnet's steps replays under dtr-next through all its trial steps; --seeds
// runs and summarizes several seeds.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nn/mnist.h"
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

// dtr-next replays each of its five scores' trial steps (dtr/score_choice.h) where dtr-eq fits
// (flops cost: the same schedule on any machine).  Damped from the first call, its damped score
// ran out of budget on this trace at both fractions while rebuilds held every pin below them
// (it evicted values needed within a few calls, and their rebuilds pinned most of the budget).
TEST(DtrSimDtrNext, ResNet20TraceFitsThroughEveryTrialStep) {
  const std::string train = std::string(REMAT_EXAMPLES_DIR) + "/train_resnet";
  if (!std::filesystem::exists(kSim) || !std::filesystem::exists(train))
    GTEST_SKIP() << "dtr_sim or train_resnet is not built";
  if (!std::filesystem::exists(nn::kFashionMnistDir))
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  const std::string trace = testing::unique_temp_path("resnet20_steps", ".jsonl");
  // Seven steps: the first is learned from, then one trial step per score, then the chosen one.
  const testing::CommandResult made = testing::run_command(
      train + " --steps 7 --train-limit 384 --test-limit 64 --budget none --trace " + trace +
      " 2>&1");
  ASSERT_EQ(made.status, 0) << made.output;
  for (const char* fraction : {"0.25", "0.3"}) {
    SCOPED_TRACE(fraction);
    auto rows = rows_of(std::string("--cost flops --heuristic dtr-eq,dtr-next --budget ") +
                        fraction + " " + trace);
    ASSERT_EQ(rows["dtr-eq"].at("status"), "ok") << rows["dtr-eq"].dump();
    EXPECT_EQ(rows["dtr-next"].at("status"), "ok") << rows["dtr-next"].dump();
  }
  std::filesystem::remove(trace);
}

// --seeds N: one JSON row per run, seeds --seed to --seed + N - 1, each the run that seed alone
// gives; the table's row is their mean overhead, with the least and the most.
TEST(DtrSimSeeds, RunsEachSeedAndSummarizesThem) {
  if (!std::filesystem::exists(kSim)) GTEST_SKIP() << "dtr_sim is not built";
  const std::string args = "--cost unit --heuristic random --budget 0.4 chain:32";
  const testing::CommandResult all =
      testing::run_command(kSim + " --json --seeds 3 --seed 5 " + args + " 2>/dev/null");
  ASSERT_EQ(all.status, 0) << all.output;
  std::map<std::uint64_t, double> by_seed;
  std::istringstream lines(all.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.front() != '{') continue;
    const auto j = nlohmann::json::parse(line);
    ASSERT_EQ(j.at("status"), "ok") << line;
    by_seed[j.at("seed").get<std::uint64_t>()] = j.at("overhead").get<double>();
  }
  ASSERT_EQ(by_seed.size(), 3u);
  EXPECT_EQ(by_seed.begin()->first, 5u);
  double sum = 0, lo = by_seed.begin()->second, hi = lo;
  for (const auto& [seed, overhead] : by_seed) {
    auto alone = rows_of("--seed " + std::to_string(seed) + " " + args);
    EXPECT_EQ(alone["random"].at("overhead").get<double>(), overhead) << "seed " << seed;
    sum += overhead, lo = std::min(lo, overhead), hi = std::max(hi, overhead);
  }
  EXPECT_LT(lo, hi);  // the random heuristic's victims differ from seed to seed
  const testing::CommandResult table =
      testing::run_command(kSim + " --seeds 3 --seed 5 " + args + " 2>/dev/null");
  ASSERT_EQ(table.status, 0) << table.output;
  const std::size_t at = table.output.find("\nrandom ");
  ASSERT_NE(at, std::string::npos) << table.output;
  std::istringstream row(table.output.substr(at + 1));
  std::string name, policy, bytes, unit, fraction, status;
  double mean = 0, peak = 0, evictions = 0, remats = 0, metadata = 0, least = 0, most = 0;
  std::string peak_unit;
  row >> name >> policy >> bytes >> unit >> fraction >> status >> mean >> peak >> peak_unit >>
      evictions >> remats >> metadata >> least >> most;
  EXPECT_EQ(status, "ok");
  EXPECT_NEAR(mean, sum / 3, 1e-4);
  EXPECT_NEAR(least, lo, 1e-4);
  EXPECT_NEAR(most, hi, 1e-4);
}

}  // namespace
}  // namespace remat
