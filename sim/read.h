// Readers of recorded runs: framework traces (docs/trace-format.md) and the DTR research
// prototype's logs (../shared/reference/dtr-log-format.md), one JSON object per line, into the
// Program the simulator replays.  A malformed line is a remat::Error naming the input and line.
// Usage: for (const Program& p : read_programs("logs.zip")) replay(p, options);
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "sim/program.h"

namespace remat::sim {

// Parses the text of one trace or log.  Events start after the first START annotation (from
// the first line when there is none); `source` names the input in errors.
Program parse_program(std::string_view text, const std::string& source);

// A `.zip` gives one program per `*.log` member, in name order; any other path is one trace
// or log.
std::vector<Program> read_programs(const std::string& path);

}  // namespace remat::sim
