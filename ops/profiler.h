// Where a step's kernel time goes: per op name, the calls, kernel seconds, flops and page faults of
// every dispatched call while profiling is on (the pool's rematerializations are not dispatched
// calls and are not counted).  On a GPU each call then waits for its kernels, so the times are
// the device's, and the run is slower than without profiling.  Off by default; when off the
// dispatch path pays one relaxed load per call. Usage: OpProfiler::enable(); step(); for (auto& e :
// OpProfiler::entries()) fmt::print(...);
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

struct OpProfileEntry {
  std::string name;
  std::int64_t calls = 0;
  double seconds = 0;
  double flops = 0;
  std::int64_t page_faults = 0;  // minor faults of the process while the kernels ran
};

class OpProfiler {
 public:
  static void enable(bool on = true);
  static bool enabled();
  static void reset();
  // The entries so far, most kernel time first.
  static std::vector<OpProfileEntry> entries();
  // A table of the entries (name, calls, ms, share, GFLOP/s), the top `rows` of them.
  static std::string report(std::size_t rows = 30);
  // Called by the dispatch path around a kernel: the process's minor page faults so far (a
  // fresh output buffer faults in its pages as the kernel first writes them).
  static std::int64_t minor_faults();
  static void add(std::string_view op, double seconds, double flops, std::int64_t page_faults);
};

}  // namespace remat
