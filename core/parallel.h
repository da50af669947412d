// The framework's thread setting and its one parallel loop.  Work is split into fixed chunks
// that do not depend on timing, so results are deterministic for a fixed thread count.
// Usage: set_num_threads(2); parallel_for(0, n, 4096, [&](int64_t b, int64_t e) { ... });
#pragma once
#include <cstdint>
#include <functional>

namespace remat {

// Default: half the hardware threads (at least one), so two processes on two cores do not
// oversubscribe.  Also sets oneDNN's thread count.
int num_threads();
void set_num_threads(int n);
// The most threads set_num_threads accepts: 4 x the hardware threads.
int max_threads();

// Calls fn(begin, end) on disjoint chunks of [begin, end); runs inline when the range is
// smaller than `grain` or only one thread is configured.
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn);

// OpenMP reads its wait policy once, when the runtime loads.  Programs call this first thing in
// main: if OMP_WAIT_POLICY is unset it sets it to PASSIVE and re-executes the program, so idle
// worker threads sleep instead of spinning on a shared machine.
void ensure_passive_threads(int argc, char** argv);

}  // namespace remat
