// Lines of a DTR prototype log (the simulator's input), for tests that build small programs by
// hand: each returns its lines, newline-terminated, to be concatenated and parsed.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace remat::testing {

std::string log_start();  // ANNOTATE START
std::string log_constant(const std::string& name, std::size_t bytes);
// `op` reading `args` into a fresh value `out` of `bytes`, its kernel `time_ns` long.
std::string log_call(const std::string& op, const std::string& out,
                     const std::vector<std::string>& args, std::size_t bytes,
                     long long time_ns = 1000);
std::string log_release(const std::string& name);

}  // namespace remat::testing
