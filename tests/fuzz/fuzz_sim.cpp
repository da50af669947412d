// Fuzzes the simulator's readers (framework traces and prototype logs, plain or zipped) and a
// short replay of what they accept: any input is a program or a remat::Error, and a program
// replays without undefined behaviour.
#include "core/error.h"
#include "sim/read.h"
#include "sim/runs.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace sim = remat::sim;
  std::vector<sim::Program> programs;
  try {
    const bool zip = size >= 2 && data[0] == 'P' && data[1] == 'K';
    programs = sim::read_programs(remat::fuzz::input_file(data, size, zip ? ".zip" : ".log"));
  } catch (const remat::Error&) {
    return 0;
  }
  for (const sim::Program& p : programs) {
    if (p.events.size() > 2000) continue;  // keeps each run short
    try {
      sim::RunOptions o;
      o.cost = remat::CostModel::Unit;
      o.thrash_limit = 4;
      const sim::Baseline base = sim::baseline(p, o);
      for (const char* b : {"0.5", "0.2"}) sim::run(p, base, o, remat::parse_budget(b));
    } catch (const remat::Error&) {
    }
  }
  return 0;
}
