#include "core/parallel.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#include "core/error.h"

namespace remat {
namespace {
int default_threads() {
  if (const char* env = std::getenv("REMAT_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency() / 2);
}
std::atomic<int> g_threads{0};
}  // namespace

int num_threads() {
  int n = g_threads.load();
  if (n == 0) {
    set_num_threads(default_threads());
    n = g_threads.load();
  }
  return n;
}

void set_num_threads(int n) {
  REMAT_CHECK(n >= 1, "set_num_threads: expected a positive thread count, got {}", n);
  g_threads = n;
  omp_set_num_threads(n);
}

void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn) {
  const std::int64_t n = end - begin;
  if (n <= 0) return;
  const int threads = num_threads();
  if (threads == 1 || n <= grain) {
    fn(begin, end);
    return;
  }
  const std::int64_t chunks = std::min<std::int64_t>(threads, (n + grain - 1) / grain);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t b = begin + n * c / chunks, e = begin + n * (c + 1) / chunks;
    fn(b, e);
  }
}

void ensure_passive_threads(int /*argc*/, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);
  // If re-execution is impossible, carry on: correctness does not depend on the policy.
}

}  // namespace remat
