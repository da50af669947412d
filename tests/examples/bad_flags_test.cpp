// Bad command lines end the programs with a message naming the flag and what it accepts, exit
// status non-zero, before any training; valid edge cases (one step, no warm-up) run.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/cuda.h"
#include "nn/mnist.h"
#include "support/test_util.h"

namespace remat {
namespace {

struct Outcome {
  int status = 0;
  std::string output;
};

Outcome run(const std::string& program, const std::string& args) {
  const std::string cmd = program + " " + args + " 2>&1";
  std::FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw Error("cannot run " + cmd);
  Outcome o;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) o.output += buf;
  o.status = pclose(pipe);
  return o;
}

const std::string kExamples = REMAT_EXAMPLES_DIR;
const std::string kResnet = kExamples + "/train_resnet";
const std::string kSim = kExamples + "/../tools/dtr_sim";

::testing::AssertionResult refused(const std::string& program, const std::string& args,
                                   std::vector<std::string> fragments) {
  const Outcome o = run(program, args);
  if (o.status == 0) return ::testing::AssertionFailure() << args << " was accepted:\n" << o.output;
  if (o.output.find("Segmentation") != std::string::npos ||
      o.output.find("terminate called") != std::string::npos)
    return ::testing::AssertionFailure() << args << " crashed:\n" << o.output;
  for (const auto& f : fragments)
    if (o.output.find(f) == std::string::npos)
      return ::testing::AssertionFailure() << args << ": the message lacks '" << f << "':\n"
                                           << o.output;
  return ::testing::AssertionSuccess();
}

TEST(BadFlags, GanFlagsNameTheirRange) {
  const std::string gan = kExamples + "/train_gan";
  if (!std::filesystem::exists(gan)) GTEST_SKIP() << "examples are not built";
  EXPECT_TRUE(refused(gan, "--unroll -1", {"--unroll", "from 0 to"}));
  EXPECT_TRUE(refused(gan, "--beta1 1", {"--beta1", "below 1"}));
  EXPECT_TRUE(refused(gan, "--snapshots 0", {"--snapshots"}));
  EXPECT_TRUE(refused(gan, "--schedule linear", {"--schedule", "linear"}));
  EXPECT_TRUE(refused(gan, "--lr-generator 0", {"--lr-generator", "positive"}));
  EXPECT_TRUE(refused(gan, "--plot /nonexistent/dir/x.png --steps 1", {"/nonexistent/dir"}));
}

// --device: a malformed name names the accepted forms; a GPU this process cannot use says why
// (without one here: "no CUDA device"; built without the backend: why it is off).
TEST(BadFlags, DeviceFlagNamesItsFormsAndAMissingGpu) {
  const std::string mlp = kExamples + "/train_mlp";
  if (!std::filesystem::exists(mlp)) GTEST_SKIP() << "examples are not built";
  EXPECT_TRUE(refused(mlp, "--device gpu", {"--device", "cpu, cuda or cuda:N"}));
  EXPECT_TRUE(refused(mlp, "--device cuda:x", {"--device", "cpu, cuda or cuda:N"}));
  EXPECT_TRUE(refused(mlp, "--device cuda:64", {"--device", "cpu, cuda or cuda:N"}));
  if (!cuda::available()) {
    EXPECT_TRUE(refused(mlp, "--device cuda --random-data --steps 1", {"--device cuda"}));
  }
}

TEST(BadFlags, LanguageModelFlagsNameTheirRange) {
  const std::string lm = kExamples + "/train_lm";
  if (!std::filesystem::exists(lm)) GTEST_SKIP() << "examples are not built";
  EXPECT_TRUE(refused(lm, "--model gru", {"--model", "gru"}));
  EXPECT_TRUE(refused(lm, "--length 0", {"--length", "from 1 to"}));
  EXPECT_TRUE(refused(lm, "--dropout 1", {"--dropout"}));
  EXPECT_TRUE(refused(lm, "--data-dir /nonexistent/fortunes --steps 1",
                      {"/nonexistent/fortunes", "fortunes"}));
  EXPECT_TRUE(refused(lm, "--model transformer --d-model 30 --heads 4 --steps 1", {"30", "4"}));
}

TEST(BadFlags, TrainingFlagsNameTheirRange) {
  if (!std::filesystem::exists(kResnet)) GTEST_SKIP() << "examples are not built";
  EXPECT_TRUE(refused(kResnet, "--threads 100000", {"--threads", "from 1 to"}));
  EXPECT_TRUE(refused(kResnet, "--threads 20000", {"--threads"}));
  EXPECT_TRUE(refused(kResnet, "--budget 1e30B", {"--budget", "1 PiB"}));
  EXPECT_TRUE(refused(kResnet, "--budget 99999999999999999999", {"--budget", "1 PiB"}));
  EXPECT_TRUE(refused(kResnet, "--train-limit -3", {"--train-limit", "from 0 to"}));
  EXPECT_TRUE(refused(kResnet, "--test-limit -3", {"--test-limit", "from 0 to"}));
  EXPECT_TRUE(refused(kResnet, "--steps 99999999999999999999", {"--steps", "whole number"}));
  EXPECT_TRUE(refused(kResnet, "--steps 2.5", {"--steps", "whole number"}));
  EXPECT_TRUE(refused(kResnet, "--seed -1", {"--seed", "whole number from 0"}));
  EXPECT_TRUE(refused(kResnet, "--lr 0", {"--lr", "must be a positive number, got '0'"}));
  EXPECT_TRUE(refused(kResnet, "--lr nan", {"--lr", "positive"}));
  EXPECT_TRUE(refused(kResnet, "--momentum 1.5", {"--momentum", "from 0 to 1"}));
  // An unwritable --save fails before training starts, not after it.
  const Outcome o = run(kResnet, "--save /nonexistent/dir/model.rmt --steps 1000");
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.output.find("cannot save to '/nonexistent/dir/model.rmt'"), std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("steps of"), std::string::npos) << "training started:\n" << o.output;
}

// A --plot that cannot be written, and a --plot-step past the run, fail before training.
TEST(BadFlags, PlotFlagsFailBeforeTraining) {
  if (!std::filesystem::exists(kResnet)) GTEST_SKIP() << "examples are not built";
  EXPECT_TRUE(refused(kResnet, "--plot-points -1", {"--plot-points", "from 0 to"}));
  EXPECT_TRUE(refused(kResnet, "--plot-step 1.5", {"--plot-step", "whole number"}));
  for (const std::string path : {"/nonexistent/dir/plot.png", "/"}) {
    const Outcome o = run(kResnet, "--plot " + path + " --steps 1000");
    EXPECT_NE(o.status, 0) << path;
    EXPECT_NE(o.output.find("--plot: cannot save to '" + path), std::string::npos) << o.output;
    EXPECT_EQ(o.output.find("steps of"), std::string::npos) << "training started:\n" << o.output;
  }
  if (!std::filesystem::exists(nn::kFashionMnistDir))
    GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string png = testing::unique_temp_path("plot_step", ".png");
  const Outcome o = run(kResnet, "--plot " + png +
                                     " --plot-step 9 --steps 3 --batch-size 16 --train-limit 64 "
                                     "--test-limit 16");
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.output.find("--plot-step 9 is past the last step of the run (3)"), std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("steps of"), std::string::npos) << "training started:\n" << o.output;
  EXPECT_FALSE(std::filesystem::exists(png + ".dat"));
}

TEST(BadFlags, OneStepRuns) {
  if (!std::filesystem::exists(kResnet)) GTEST_SKIP() << "examples are not built";
  if (!std::filesystem::exists(nn::kFashionMnistDir))
    GTEST_SKIP() << "Fashion-MNIST is not installed";
  for (const char* args : {"--steps 1", "--steps 3 --warmup 0"}) {
    const Outcome o =
        run(kResnet,
            std::string(args) + " --batch-size 16 --train-limit 64 --test-limit 16 --budget none");
    EXPECT_EQ(o.status, 0) << args << ":\n" << o.output;
    EXPECT_NE(o.output.find("\"model\":\"resnet20\""), std::string::npos) << o.output;
  }
}

TEST(BadFlags, SimulatorInputsAndFlags) {
  if (!std::filesystem::exists(kSim)) GTEST_SKIP() << "dtr_sim is not built";
  const std::string dir = testing::unique_temp_path("remat_bad_sim", "");
  std::filesystem::create_directories(dir);
  const std::string log = dir + "/ok.log";
  std::ofstream(log) << "{\"INSTRUCTION\":\"ANNOTATE\",\"ANNOTATION\":\"START\"}\n"
                        "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x\"}\n"
                        "{\"INSTRUCTION\":\"MEMORY\",\"NAME\":\"x\",\"MEMORY\":\"64\"}\n";
  EXPECT_TRUE(refused(kSim, "--thrash-limit -1 " + log, {"--thrash-limit", ">= 0"}));
  EXPECT_TRUE(refused(kSim, "--sample 99999999999999999999 " + log, {"--sample", "whole number"}));
  EXPECT_TRUE(refused(kSim, "--sample -1 " + log, {"--sample", "whole number"}));
  EXPECT_TRUE(refused(kSim, "--time-limit -1 " + log, {"--time-limit", "positive"}));
  EXPECT_TRUE(refused(kSim, dir, {"dtr_sim:", "not a regular file"}));
  const std::string empty = dir + "/empty.log";
  std::ofstream(empty).close();
  EXPECT_TRUE(refused(kSim, empty, {"dtr_sim:", "holds no events"}));
  const std::string bad = dir + "/bad.log";
  std::ofstream(bad) << "{\"INSTRUCTION\":\"ANNOTATE\",\"ANNOTATION\":\"START\",\"SOURCE\":[1]}\n";
  EXPECT_TRUE(refused(kSim, bad, {"dtr_sim:", "bad.log:1", "SOURCE must be a string"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace remat
