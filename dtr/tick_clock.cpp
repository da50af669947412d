#include "dtr/tick_clock.h"

#include <chrono>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace remat {

using Steady = std::chrono::steady_clock;

std::uint64_t TickClock::steady_nanoseconds() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch())
          .count());
}

// The counter's rate against steady_clock over a 1 ms spin: a read of either clock takes tens
// of nanoseconds, so the rate is good to a few parts in 1e5.
TickClock::Rate TickClock::measure_rate() {
  const Rate steady{false, 1e-9};
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000007u) return steady;
  __get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx);
  if (!((edx >> 8) & 1u)) return steady;  // CPUID.80000007H:EDX[8]: the invariant TSC
  const Steady::time_point t0 = Steady::now();
  const std::uint64_t c0 = __builtin_ia32_rdtsc();
  Steady::time_point t1;
  do {
    t1 = Steady::now();
  } while (t1 - t0 < std::chrono::milliseconds(1));
  const std::uint64_t c1 = __builtin_ia32_rdtsc();
  if (c1 <= c0) return steady;
  return {true, std::chrono::duration<double>(t1 - t0).count() / static_cast<double>(c1 - c0)};
#else
  return steady;
#endif
}

}  // namespace remat
