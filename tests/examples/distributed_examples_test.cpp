// train_resnet under `mpirun -np 2`: one log and one summary (rank 0's) with world_size 2, the
// same numbers with and without a budget on each rank, and a checkpoint saved by two ranks
// that one process resumes from (and the other way round) with the numbers of an unbroken
// run.  Skips, saying so, without MPI, mpirun, the examples or Fashion-MNIST.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "nn/mnist.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::CommandResult;

class DistributedResnet : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    mpirun_ = testing::mpirun_prefix(2, &why);
    if (mpirun_.empty()) GTEST_SKIP() << why;
    if (!std::filesystem::exists(std::string(REMAT_EXAMPLES_DIR) + "/train_resnet"))
      GTEST_SKIP() << "examples are not built (REMAT_BUILD_EXAMPLES=OFF)";
    if (!std::filesystem::exists(nn::kFashionMnistDir))
      GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  }
  // Runs train_resnet (or `example`) on `ranks` processes; returns its summary, checking there
  // is one.
  nlohmann::json run(int ranks, const std::string& args,
                     const std::string& example = "train_resnet") {
    const std::string program = std::string(REMAT_EXAMPLES_DIR) + "/" + example + " --threads 1 ";
    const CommandResult r =
        testing::run_command((ranks > 1 ? mpirun_ + " " : std::string()) + program + args);
    EXPECT_EQ(r.status, 0) << r.output;
    const auto first = r.output.find("{\""), last = r.output.rfind("{\"");
    if (last == std::string::npos) throw Error("no summary in:\n" + r.output);
    EXPECT_EQ(first, last) << "more than one summary:\n" << r.output;
    return nlohmann::json::parse(r.output.substr(last));
  }
  std::string mpirun_;
};

const char* kCommon = "--batch-size 16 --train-limit 512 --test-limit 96 --seed 2 --warmup 2";

TEST_F(DistributedResnet, OneSummaryAndTheSameNumbersUnderABudget) {
  const auto plain = run(2, fmt::format("{} --steps 4 --budget none", kCommon));
  const auto tight = run(2, fmt::format("{} --steps 4 --budget 0.4", kCommon));
  EXPECT_EQ(plain["world_size"].get<int>(), 2);
  EXPECT_EQ(plain["final_loss"].get<double>(), tight["final_loss"].get<double>());
  EXPECT_EQ(plain["test_accuracy"].get<double>(), tight["test_accuracy"].get<double>());
  EXPECT_GT(tight["evictions"].get<long>(), 0);
  EXPECT_LE(tight["peak_resident_bytes"].get<double>(), tight["budget_bytes"].get<double>());
  EXPECT_GT(plain["allreduce_seconds"].get<double>(), 0);
  EXPECT_GE(plain["gradient_buckets"].get<int>(), 1);
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

TEST_F(DistributedResnet, CheckpointsMoveBetweenRankCounts) {
  // Rank 0 saves: the same bytes with and without a budget on each rank.
  const std::string a = testing::unique_temp_path("dist_ckpt_a", ".bin");
  const std::string b = testing::unique_temp_path("dist_ckpt_b", ".bin");
  run(2, fmt::format("{} --steps 4 --budget none --save {}", kCommon, a));
  run(2, fmt::format("{} --steps 4 --budget 0.4 --save {}", kCommon, b));
  ASSERT_TRUE(std::filesystem::exists(a));
  EXPECT_EQ(file_bytes(a), file_bytes(b));
  EXPECT_EQ(file_bytes(a + ".optim"), file_bytes(b + ".optim"));
  // Saved by two ranks, resumed by one; saved by one, resumed by two.
  const auto single = run(1, fmt::format("{} --steps 2 --resume {}", kCommon, a));
  EXPECT_EQ(single["world_size"].get<int>(), 1);
  EXPECT_TRUE(std::isfinite(single["final_loss"].get<double>()));
  const std::string c = testing::unique_temp_path("dist_ckpt_c", ".bin");
  run(1, fmt::format("{} --steps 2 --save {}", kCommon, c));
  const auto two = run(2, fmt::format("{} --steps 2 --resume {}", kCommon, c));
  EXPECT_EQ(two["world_size"].get<int>(), 2);
  EXPECT_TRUE(std::isfinite(two["final_loss"].get<double>()));
  for (const auto& p : {a, b, c})
    for (const auto& suffix : {"", ".optim"}) std::filesystem::remove(p + suffix);
}

TEST_F(DistributedResnet, TrainMlpRunsUnderMpirunToo) {
  const auto two = run(2,
                       "--random-data --steps 4 --hidden 64 --batch-size 64 --train-limit 1024 "
                       "--test-limit 256 --budget none",
                       "train_mlp");
  EXPECT_EQ(two["world_size"].get<int>(), 2);
  EXPECT_TRUE(std::isfinite(two["final_loss"].get<double>()));
  EXPECT_GT(two["test_accuracy"].get<double>(), 0.0);
}

}  // namespace
}  // namespace remat
