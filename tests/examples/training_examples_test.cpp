// The training examples end to end: train_resnet gives the same final loss under a tight budget
// and with checkpointed stages as without either, and a short run on a Fashion-MNIST subset learns
// well above chance.  The programs run as a user would run them; their last output line is the JSON
// summary.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nn/mnist.h"
#include "nn/text.h"
#include "support/test_util.h"

namespace remat {
namespace {

// `env` (e.g. "env PATH=/nonexistent") goes before the program.
nlohmann::json run_example(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " " + std::string(REMAT_EXAMPLES_DIR) + "/" + args;
  const testing::CommandResult r = testing::run_command(cmd);
  if (r.status != 0) throw Error(fmt::format("{} failed ({}):\n{}", cmd, r.status, r.output));
  // The last line of output is the JSON summary.
  std::string_view out = r.output;
  while (!out.empty() && out.back() == '\n') out.remove_suffix(1);
  const auto start = out.rfind('\n');
  return nlohmann::json::parse(out.substr(start == std::string_view::npos ? 0 : start + 1));
}

bool ready(std::string* why) {
  if (!std::filesystem::exists(std::string(REMAT_EXAMPLES_DIR) + "/train_resnet")) {
    *why = "examples are not built (REMAT_BUILD_EXAMPLES=OFF)";
    return false;
  }
  if (!std::filesystem::exists(nn::kFashionMnistDir)) {
    *why = "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
    return false;
  }
  return true;
}

TEST(TrainResnet, SameFinalLossUnderATightBudget) {
  std::string why;
  if (!ready(&why)) GTEST_SKIP() << why;
  const std::string common =
      "train_resnet --steps 4 --batch-size 32 --train-limit 512 --test-limit 64 --seed 3";
  const auto plain = run_example(common + " --budget none");
  const auto tight = run_example(common + " --budget 0.3");
  EXPECT_EQ(plain["final_loss"].get<double>(), tight["final_loss"].get<double>());
  EXPECT_EQ(plain["test_accuracy"].get<double>(), tight["test_accuracy"].get<double>());
  EXPECT_GT(tight["evictions"].get<long>(), 0);
  EXPECT_LE(tight["peak_resident_bytes"].get<double>(), tight["budget_bytes"].get<double>());
  EXPECT_LT(tight["peak_resident_bytes"].get<double>(),
            0.35 * tight["unbudgeted_peak_bytes"].get<double>());
}

// --trace records the training steps and stops before the final evaluation, whose calls would
// count in the compute dtr_sim replays: every call lies before the last step's end.
TEST(TrainResnet, TraceEndsWithTheLastTrainingStep) {
  std::string why;
  if (!ready(&why)) GTEST_SKIP() << why;
  const std::string trace = testing::unique_temp_path("train_resnet_trace", ".jsonl");
  const auto r = run_example(
      "train_resnet --steps 2 --batch-size 16 --train-limit 32 --test-limit 64 --budget none "
      "--trace " +
      trace);
  EXPECT_GT(r["test_accuracy"].get<double>(), 0);  // the evaluation ran
  std::ifstream in(trace);
  int step_ends = 0, calls = 0, calls_after_last_step = 0;
  for (std::string line; std::getline(in, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event["INSTRUCTION"] == "ANNOTATE" && event["ANNOTATION"] == "STEP_END") {
      ++step_ends;
      calls_after_last_step = 0;
    } else if (event["INSTRUCTION"] == "CALL") {
      ++calls;
      ++calls_after_last_step;
    }
  }
  std::filesystem::remove(trace);
  EXPECT_EQ(step_ends, 2);
  EXPECT_GT(calls, 0);
  EXPECT_EQ(calls_after_last_step, 0);
}

// Checkpointed stages: the same numbers as the plain run, at a lower peak, and the same again
// under DTR with the checkpointed run's peak as the budget.
TEST(TrainResnet, CheckpointStagesGiveTheSameLossAtALowerPeak) {
  std::string why;
  if (!ready(&why)) GTEST_SKIP() << why;
  const std::string common =
      "train_resnet --steps 3 --batch-size 32 --train-limit 512 --test-limit 64 --seed 3";
  const auto plain = run_example(common + " --budget none");
  const auto ckpt = run_example(common + " --budget none --checkpoint-stages");
  EXPECT_TRUE(ckpt["checkpoint_stages"].get<bool>());
  EXPECT_EQ(plain["final_loss"].get<double>(), ckpt["final_loss"].get<double>());
  EXPECT_EQ(plain["test_accuracy"].get<double>(), ckpt["test_accuracy"].get<double>());
  EXPECT_EQ(ckpt["evictions"].get<long>(), 0);
  EXPECT_LT(ckpt["peak_resident_bytes"].get<double>(),
            0.8 * plain["peak_resident_bytes"].get<double>());
  const auto dtr = run_example(
      common + fmt::format(" --budget {}", ckpt["peak_resident_bytes"].get<std::size_t>()));
  EXPECT_EQ(plain["final_loss"].get<double>(), dtr["final_loss"].get<double>());
  EXPECT_GT(dtr["evictions"].get<long>(), 0);
}

// The data file of --plot: blocks separated by two blank lines, each a list of rows of words
// ('#' lines are comments).
std::vector<std::vector<std::vector<std::string>>> plot_blocks(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::vector<std::string>>> blocks(1);
  std::string line;
  int blank = 0;
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (++blank == 2) blocks.emplace_back();
      continue;
    }
    blank = 0;
    if (line[0] == '#') continue;
    std::istringstream words(line);
    blocks.back().emplace_back(std::istream_iterator<std::string>(words),
                               std::istream_iterator<std::string>());
  }
  return blocks;
}

// --plot: the memory timelines of the measured unbudgeted step and of a budgeted one (the same
// op calls, the budgeted one evicting), the loss of every step and the test curve, drawn into a
// PNG when gnuplot is installed; its evaluations change neither the training nor the summary's
// fields.  Without gnuplot the run still succeeds and keeps the numbers.
TEST(TrainResnet, PlotDrawsMemoryAndLearningCurves) {
  std::string why;
  if (!ready(&why)) GTEST_SKIP() << why;
  const std::string common =
      "train_resnet --steps 6 --batch-size 16 --train-limit 256 --test-limit 64 --seed 3 "
      "--budget 0.5";
  const std::string png = testing::unique_temp_path("resnet_plot", ".png");
  const auto plain = run_example(common);
  const auto plotted = run_example(common + " --plot " + png + " --plot-step 4 --plot-points 2");
  EXPECT_TRUE(plain["plot"].is_null());
  EXPECT_EQ(plain["final_loss"].get<double>(), plotted["final_loss"].get<double>());
  EXPECT_EQ(plain["test_accuracy"].get<double>(), plotted["test_accuracy"].get<double>());
  for (const auto& [key, value] : plain.items())
    EXPECT_TRUE(plotted.contains(key)) << key << " is missing with --plot";
  EXPECT_GT(plotted["plot_eval_seconds"].get<double>(), 0);

  const auto blocks = plot_blocks(png + ".dat");
  ASSERT_EQ(blocks.size(), 5u);
  const auto &unbudgeted = blocks[0], &budgeted = blocks[1];
  ASSERT_FALSE(budgeted.empty());
  EXPECT_EQ(unbudgeted.size(), budgeted.size());  // one step's op calls each
  const double budget_mib = plotted["budget_bytes"].get<double>() / 1048576.0;
  double unbudgeted_peak = 0, budgeted_peak = 0, evictions = 0;
  for (const auto& row : unbudgeted) unbudgeted_peak = std::max(unbudgeted_peak, std::stod(row[1]));
  for (const auto& row : budgeted) {
    budgeted_peak = std::max(budgeted_peak, std::stod(row[1]));
    evictions += std::stod(row[3]);
  }
  EXPECT_GT(unbudgeted_peak, budget_mib);
  EXPECT_LE(budgeted_peak, budget_mib + 1e-3);  // the file rounds to 1e-4 MiB
  EXPECT_GT(evictions, 0);
  EXPECT_EQ(evictions, std::stod(budgeted.back()[5]));  // counts per call add up
  EXPECT_EQ(blocks[2].size(), 6u);                      // the loss of every step
  ASSERT_EQ(blocks[3].size(), 2u);                      // test accuracy after steps 3 and 6
  EXPECT_EQ(blocks[3][0][0], "3");
  EXPECT_EQ(blocks[3][1][0], "6");
  ASSERT_EQ(blocks[4].size(), 1u);  // the whole test set at the end
  EXPECT_NEAR(std::stod(blocks[4][0][1]), plotted["test_accuracy"].get<double>(), 1e-5);

  if (std::system("command -v gnuplot > /dev/null 2>&1") == 0) {
    EXPECT_EQ(plotted["plot"], png);
    std::ifstream in(png, std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    EXPECT_EQ(std::string(magic + 1, 3), "PNG");
    EXPECT_GT(std::filesystem::file_size(png), 10000u);
  } else {
    std::printf("gnuplot is not installed: the picture is not checked\n");
  }
  std::filesystem::remove(png);
  std::filesystem::remove(png + ".dat");

  const auto without = run_example(
      "train_resnet --steps 2 --batch-size 16 --train-limit 64 --test-limit 16 --plot " + png,
      "env PATH=/nonexistent");
  EXPECT_TRUE(without["plot"].is_null());
  EXPECT_FALSE(std::filesystem::exists(png));
  EXPECT_TRUE(std::filesystem::exists(png + ".dat"));
  std::filesystem::remove(png + ".dat");
}

TEST(TrainMlp, ShortRunOnAFashionMnistSubsetLearns) {
  std::string why;
  if (!ready(&why)) GTEST_SKIP() << why;
  const auto r = run_example(
      "train_mlp --epochs 3 --train-limit 4096 --test-limit 1000 --hidden 256 --seed 1");
  std::printf("train_mlp on 4096 Fashion-MNIST images, 3 epochs: test accuracy %.3f\n",
              r["test_accuracy"].get<double>());
  EXPECT_GT(r["test_accuracy"].get<double>(), 0.6);  // chance is 0.1
}

// The TreeLSTM over generated ListOps: a short run gives the same final loss and test accuracy
// under a tight budget as without one, and reports the largest tree it saw.
TEST(TrainTreeLstm, SameFinalLossUnderATightBudget) {
  if (!std::filesystem::exists(std::string(REMAT_EXAMPLES_DIR) + "/train_treelstm"))
    GTEST_SKIP() << "examples are not built (REMAT_BUILD_EXAMPLES=OFF)";
  const std::string common =
      "train_treelstm --steps 6 --batch-size 128 --group 16 --hidden 32 --embedding 16 "
      "--train-size 1024 "
      "--valid-size 64 --test-size 128 --eval-every 3 --seed 2";
  const auto plain = run_example(common + " --budget none");
  const auto tight = run_example(common + " --budget 0.3");
  EXPECT_EQ(plain["model"], "treelstm");
  EXPECT_EQ(plain["final_loss"].get<double>(), tight["final_loss"].get<double>());
  EXPECT_EQ(plain["test_accuracy"].get<double>(), tight["test_accuracy"].get<double>());
  EXPECT_EQ(plain["valid_curve"].size(), 2u);
  EXPECT_GT(plain["max_nodes"].get<long>(), 3);
  EXPECT_GT(tight["evictions"].get<long>(), 0);
  EXPECT_LE(tight["peak_resident_bytes"].get<double>(), tight["budget_bytes"].get<double>());
}

// Both language models on fortunes: a short run gives the same loss and validation bits per
// character under a budget that evicts as without one, and reports its validation curve.
TEST(TrainLm, SameLossAndValidationBpcUnderABudget) {
  if (!std::filesystem::exists(std::string(REMAT_EXAMPLES_DIR) + "/train_lm"))
    GTEST_SKIP() << "examples are not built (REMAT_BUILD_EXAMPLES=OFF)";
  if (!std::filesystem::exists(nn::kFortunesDir))
    GTEST_SKIP() << "the fortunes corpus is not installed (apt-get install fortunes)";
  for (const std::string model : {"lstm", "transformer"}) {
    SCOPED_TRACE(model);
    const std::string common = "train_lm --model " + model +
                               " --steps 5 --batch-size 8 --length 64 --embedding 16 --hidden 64 "
                               "--d-model 32 --heads 4 --ffn 64 --layers 4 --warmup 2 "
                               "--eval-every 2 --valid-batches 3 --seed 4";
    const auto plain = run_example(common + " --budget none");
    const auto tight = run_example(common + " --budget 0.5");
    EXPECT_EQ(plain["model"], model + "_lm");
    EXPECT_EQ(plain["steps"].get<long>(), 5);
    EXPECT_EQ(plain["final_loss"].get<double>(), tight["final_loss"].get<double>());
    EXPECT_EQ(plain["valid_bpc"].get<double>(), tight["valid_bpc"].get<double>());
    // Near log2(256) = 8 bits after five steps from a random start, and finite.
    EXPECT_GT(plain["valid_bpc"].get<double>(), 4.0);
    EXPECT_LT(plain["valid_bpc"].get<double>(), 9.0);
    EXPECT_EQ(plain["valid_curve"].size(), 3u);  // steps 2, 4 and the end
    EXPECT_GT(tight["evictions"].get<long>(), 0);
    EXPECT_LE(tight["peak_resident_bytes"].get<double>(), tight["budget_bytes"].get<double>());
  }
}

// The Unrolled GAN: a short run gives the same losses and sample figures under a budget that
// evicts as without one, and draws its snapshots with gnuplot when asked.
TEST(TrainGan, SameLossesUnderABudgetAndAPlot) {
  if (!std::filesystem::exists(std::string(REMAT_EXAMPLES_DIR) + "/train_gan"))
    GTEST_SKIP() << "examples are not built (REMAT_BUILD_EXAMPLES=OFF)";
  const std::string common =
      "train_gan --unroll 3 --batch-size 64 --noise 16 --hidden 32 "
      "--discriminator-hidden 32 --eval-samples 200 --eval-every 3 --seed 4";
  const auto plain = run_example(common + " --steps 6 --budget none");
  const auto tight = run_example(common + " --steps 6 --budget 0.5");
  EXPECT_EQ(plain["model"], "gan");
  EXPECT_EQ(plain["unroll"], 3);
  EXPECT_EQ(plain["final_loss"].get<double>(), tight["final_loss"].get<double>());
  EXPECT_EQ(plain["final_discriminator_loss"].get<double>(),
            tight["final_discriminator_loss"].get<double>());
  EXPECT_EQ(plain["high_quality_fraction"].get<double>(),
            tight["high_quality_fraction"].get<double>());
  EXPECT_EQ(plain["curve"].size(), 2u);
  EXPECT_GT(tight["evictions"].get<long>(), 0);
  EXPECT_GT(tight["rematerializations"].get<long>(), 0);
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    std::printf("gnuplot is not installed: the plot is not checked\n");
    return;
  }
  const std::string png = testing::unique_temp_path("gan", ".png");
  run_example(common + " --steps 2 --plot " + png + " --snapshots 2");
  EXPECT_GT(std::filesystem::file_size(png), 1000u);
  std::filesystem::remove(png);
  std::filesystem::remove(png + ".dat");
}

// Two steps, saved, and two more resumed from the file end where four steps in one run end:
// the resumed run continues the stream of batches (constant learning rates).
TEST(TrainGan, ResumingContinuesTheRun) {
  if (!std::filesystem::exists(std::string(REMAT_EXAMPLES_DIR) + "/train_gan"))
    GTEST_SKIP() << "examples are not built (REMAT_BUILD_EXAMPLES=OFF)";
  const std::string common =
      "train_gan --unroll 2 --batch-size 32 --noise 8 --hidden 16 --discriminator-hidden 16 "
      "--eval-samples 100 --eval-every 0 --schedule constant";
  const std::string full = testing::unique_temp_path("gan_full", ".bin");
  const std::string half = testing::unique_temp_path("gan_half", ".bin");
  const std::string resumed = testing::unique_temp_path("gan_resumed", ".bin");
  run_example(common + " --steps 4 --save " + full);
  run_example(common + " --steps 2 --save " + half);
  run_example(common + " --steps 2 --resume " + half + " --save " + resumed);
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (const std::string suffix : {"", ".optim", ".discriminator", ".discriminator.optim"}) {
    SCOPED_TRACE(suffix);
    EXPECT_FALSE(bytes(full + suffix).empty());
    EXPECT_EQ(bytes(full + suffix), bytes(resumed + suffix));
    for (const auto& p : {full, half, resumed}) std::filesystem::remove(p + suffix);
  }
}

}  // namespace
}  // namespace remat
