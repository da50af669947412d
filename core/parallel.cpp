#include "core/parallel.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "core/error.h"

namespace remat {
namespace {
int hardware_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}
int default_threads() {
  if (const char* env = std::getenv("REMAT_NUM_THREADS")) {
    const std::string_view text(env);
    int n = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), n);
    REMAT_CHECK(
        r.ec == std::errc() && r.ptr == text.data() + text.size() && n >= 1 && n <= max_threads(),
        "REMAT_NUM_THREADS='{}': expected a whole number from 1 to {}", text, max_threads());
    return n;
  }
  return hardware_threads();
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

// More threads than this only add contention; tens of thousands exhaust the OpenMP runtime.
int max_threads() {
  return 4 * hardware_threads();
}

void set_num_threads(int n) {
  REMAT_CHECK(
      n >= 1 && n <= max_threads(),
      "set_num_threads: expected a thread count from 1 to {} (4 x the {} hardware threads), got {}",
      max_threads(), hardware_threads(), n);
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

void ensure_thread_policy(int /*argc*/, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  setenv("GOMP_SPINCOUNT", kDefaultSpinCount, 1);
  execv("/proc/self/exe", argv);
  // If re-execution is impossible, carry on: correctness does not depend on the policy.
}

}  // namespace remat
