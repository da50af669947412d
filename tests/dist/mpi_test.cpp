// Data-parallel training across processes: tests/dist/worker under `mpirun -np 2
// --oversubscribe` on this machine.  Two ranks with half the batch end with the parameters of
// one process with the whole batch (up to float summation order), bit-identical from run to run
// and under a budget on each rank; a rank that hangs or dies stops the job with an error naming
// it.  Skips, saying so, without mpirun or without the MPI backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "dist/dist.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::CommandResult;
using testing::run_command;

std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

nlohmann::json last_json(const CommandResult& r) {
  const auto at = r.output.rfind("{\"world_size\"");
  if (at == std::string::npos) throw Error("no JSON line in:\n" + r.output);
  return nlohmann::json::parse(r.output.substr(at, r.output.find('\n', at) - at));
}

class Mpi : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (testing::mpirun_prefix(2, &why).empty()) GTEST_SKIP() << why;
  }
  static CommandResult mpirun(int ranks, const std::string& args) {
    std::string why;
    return run_command(testing::mpirun_prefix(ranks, &why) + " " + REMAT_DIST_WORKER + " " + args);
  }
  // Trains; returns rank 0's parameters.
  std::vector<float> train(int ranks, int batch, const std::string& extra = "") {
    const std::string out = testing::unique_temp_path("dist_params", ".bin");
    const std::string args =
        fmt::format("train --batch {} --steps 5 --out {} {}", batch, out, extra);
    const CommandResult r =
        ranks == 1 ? run_command(std::string(REMAT_DIST_WORKER) + " " + args) : mpirun(ranks, args);
    EXPECT_EQ(r.status, 0) << r.output;
    const auto summary = last_json(r);
    EXPECT_EQ(summary["world_size"].get<int>(), ranks);
    EXPECT_EQ(summary["reductions"].get<int>(), 5);
    EXPECT_GT(summary["buckets"].get<int>(), 1);
    // Only rank 0 prints it.
    EXPECT_EQ(r.output.find("{\"world_size\""), r.output.rfind("{\"world_size\"")) << r.output;
    last_summary = summary;
    auto v = read_floats(out);
    std::filesystem::remove(out);
    return v;
  }
  nlohmann::json last_summary;
};

TEST_F(Mpi, TwoRanksWithHalfTheBatchMatchOneProcessWithAllOfIt) {
  const auto one = train(1, 256);
  const auto two = train(2, 128);
  ASSERT_EQ(one.size(), two.size());
  ASSERT_GT(one.size(), 0u);
  double worst = 0;
  for (std::size_t i = 0; i < one.size(); ++i)
    worst = std::max(worst, std::abs(double(one[i]) - two[i]) / (1e-3 + std::abs(double(one[i]))));
  EXPECT_LT(worst, 1e-4) << "parameters differ beyond float summation order";
  // And not trivially: training moved them (the two runs start from other seeds' weights).
  EXPECT_GT(last_summary["loss"].get<double>(), 0);
}

TEST_F(Mpi, BitIdenticalAcrossRunsAndUnderABudgetOnEachRank) {
  const auto first = train(2, 128);
  const auto again = train(2, 128);
  EXPECT_EQ(first, again);
  const auto budgeted = train(2, 128, "--budget 0.6");
  EXPECT_EQ(first, budgeted);
  EXPECT_GT(last_summary["evictions"].get<long>(), 0);
}

TEST_F(Mpi, ARankThatHangsIsATimeoutNamingIt) {
  const CommandResult r = mpirun(2, "--timeout 2 stall --delay 60");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("made no progress for 2 s waiting for rank 1"), std::string::npos)
      << r.output;
}

TEST_F(Mpi, ARankThatDiesStopsTheJob) {
  // Killed: the launcher ends the job and names the rank.
  const CommandResult r = mpirun(2, "--timeout 60 die");
  EXPECT_NE(r.status, 0) << r.output;
  // Open MPI's words: "mpirun noticed that process rank 1 with PID ... exited on signal 9".
  EXPECT_NE(r.output.find("process rank 1 "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("sum"), std::string::npos) << r.output;
}

TEST_F(Mpi, ARankThatExitsEarlyIsATimeoutNamingIt) {
  // A clean exit (MPI finalised) leaves the launcher waiting: the timeout ends the job.
  const CommandResult r = mpirun(2, "--timeout 2 quit");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("made no progress for 2 s waiting for rank 1"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("sum"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace remat
