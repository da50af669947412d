// The sqrt(N) chain of the DTR paper (examples/dtr_chain) gives the same executions, evictions
// and rematerializations in simulation as the example itself: the same chain is recorded here
// in-process, replayed, and checked against the dtr_chain binary's own JSON summary.
#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "examples/common/chain_ops.h"
#include "sim/read.h"
#include "sim/replay.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

using examples::kElements;

// dtr_chain's main, traced: x, the chain, then backward from ones.
DtrStats run_chain(std::int64_t length, std::size_t budget_bytes, const std::string& trace) {
  Pool& pool = Pool::of(Device::cpu());
  DtrConfig cfg;
  cfg.heuristic = Heuristic::EStar;
  cfg.cost = CostModel::Unit;
  pool.configure(cfg);
  allocator_for(Device::cpu()).release_all_cached();
  const std::size_t base = pool.resident_bytes();
  pool.start_trace(trace);
  DtrStats s;
  {
    Tensor x = tensor<float>(std::vector<float>(kElements, 1.0f)).set_requires_grad(true);
    pool.set_budget(base + budget_bytes);
    pool.reset_stats();
    const auto& op = examples::chain_op();
    Tensor t = x;
    for (std::int64_t i = 0; i < length; ++i) t = call1(op, {t});
    backward({t}, {ones({kElements})});
    s = pool.stats();
  }
  pool.stop_trace();
  pool.set_budget(std::nullopt);
  pool.configure({});
  return s;
}

TEST(Chain, SimulationExecutesWhatDtrChainExecutes) {
  const std::int64_t length = 256, budget_tensors = 24;
  const std::size_t bytes = static_cast<std::size_t>(budget_tensors) * kElements * sizeof(float);
  const std::string trace = testing::unique_temp_path("remat_chain", ".jsonl");
  const DtrStats real = run_chain(length, bytes, trace);
  const Program program = read_programs(trace).at(0);
  std::filesystem::remove(trace);
  ReplayOptions o;
  o.budget = bytes;
  o.heuristic = Heuristic::EStar;
  o.cost = CostModel::Unit;
  const ReplayResult sim = replay(program, o);
  ASSERT_EQ(sim.status, ReplayStatus::Ok) << sim.message;
  ASSERT_GT(real.rematerializations, 0u);
  // The trace starts before x exists; the runtime's window starts after it, which differs by
  // x's constant only (no call, no eviction).
  EXPECT_EQ(sim.executions, real.executions);
  EXPECT_EQ(sim.evictions, real.evictions);
  EXPECT_EQ(sim.rematerializations, real.rematerializations);
  EXPECT_EQ(sim.compute, static_cast<double>(real.executions));

  // The example binary itself, when built.
  const std::string exe = REMAT_EXAMPLES_DIR "/dtr_chain";
  if (!std::filesystem::exists(exe)) GTEST_SKIP() << "dtr_chain is not built (" << exe << "); compared in-process only";
  const std::string cmd = fmt::format("{} --length {} --budget-tensors {} --heuristic estar", exe, length, budget_tensors);
  std::unique_ptr<std::FILE, decltype(&pclose)> pipe(popen(cmd.c_str(), "r"), &pclose);
  ASSERT_TRUE(pipe) << cmd;
  std::string out;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), pipe.get())) out += buf.data();
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(sim.executions, j.at("executions").get<std::uint64_t>()) << out;
  EXPECT_EQ(sim.evictions, j.at("evictions").get<std::uint64_t>()) << out;
  EXPECT_EQ(sim.rematerializations, j.at("rematerializations").get<std::uint64_t>()) << out;
}

}  // namespace
}  // namespace remat::sim
