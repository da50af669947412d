// The framework's thread setting and its one parallel loop.  Work is split into fixed chunks
// that do not depend on timing, so results are deterministic for a fixed thread count.
// Usage: set_num_threads(2); parallel_for(0, n, 4096, [&](int64_t b, int64_t e) { ... });
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>

namespace remat {

// Default: every hardware thread, as PyTorch (REMAT_NUM_THREADS overrides; the test suite sets
// it to 1 per ctest job).  Also sets oneDNN's thread count.
int num_threads();
void set_num_threads(int n);
// The most threads set_num_threads accepts: 4 x the hardware threads.
int max_threads();

// The least work (in element operations) worth handing to another thread: waking a sleeping
// worker costs tens of microseconds, so smaller loops run on the calling thread alone.
inline constexpr std::int64_t kMinParallelWork = std::int64_t{1} << 17;
// The grain (items per chunk) of a loop whose items cost `work_per_item` element operations.
inline std::int64_t grain_for(std::int64_t work_per_item) {
  return work_per_item >= kMinParallelWork
             ? 1
             : kMinParallelWork / std::max<std::int64_t>(work_per_item, 1);
}

// Calls fn(begin, end) on disjoint chunks of [begin, end); runs inline when the range is
// smaller than `grain` or only one thread is configured.
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn);

// How long an idle OpenMP worker spins (libgomp's GOMP_SPINCOUNT) before it sleeps: long enough
// to catch the next parallel region of a training step, short enough that two processes on two
// cores do not spin against each other (bench/wait_policy.sh measured it; see the README).
inline constexpr const char* kDefaultSpinCount = "3000";

// OpenMP reads its wait policy once, when the runtime loads.  Programs call this first thing in
// main: unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, it sets OMP_WAIT_POLICY=PASSIVE with
// GOMP_SPINCOUNT=kDefaultSpinCount (bounded spinning, then sleep) and re-executes the program.
void ensure_thread_policy(int argc, char** argv);

}  // namespace remat
