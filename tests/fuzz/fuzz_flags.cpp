// Fuzzes the command-line parsers every example and dtr_sim share: the input's lines are the
// arguments.  Every command line is parsed or refused with CLI::ParseError or remat::Error.
#include <CLI/CLI.hpp>

#include "examples/common/dtr_flags.h"
#include "examples/common/train_flags.h"
#include "sim/budgets.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  std::string cur;
  for (std::size_t i = 0; i < size && args.size() < 16; ++i) {
    if (data[i] == '\n')
      args.push_back(std::move(cur)), cur.clear();
    else
      cur.push_back(static_cast<char>(data[i]));
  }
  if (args.size() < 16) args.push_back(cur);
  for (const auto& a : args) {
    try {
      remat::parse_budget(a);
    } catch (const remat::Error&) {
    }
    try {
      remat::sim::parse_budget_list(a);
    } catch (const remat::Error&) {
    }
  }
  CLI::App app{"fuzz"};
  remat::examples::TrainFlags train;
  remat::examples::DtrFlags dtr;
  train.add_to(app);
  dtr.add_to(app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
    (void)remat::parse_budget(dtr.budget).resolve(std::size_t{1} << 40);
    (void)train.total_steps(1000);
  } catch (const CLI::ParseError&) {
  } catch (const remat::Error&) {
  }
  return 0;
}
