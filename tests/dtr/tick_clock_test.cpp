// TickClock (dtr/tick_clock.h), the clock of the pool's search and bookkeeping times: it never
// runs backwards, and an interval read on it lies within the same interval read on
// steady_clock around it (its rate, measured once, is the right one to well within 2x).
#include "dtr/tick_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

namespace remat {
namespace {

TEST(TickClock, NeverRunsBackwards) {
  std::uint64_t last = TickClock::now();
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t t = TickClock::now();
    ASSERT_GE(t, last);
    last = t;
  }
}

TEST(TickClock, AnIntervalAgreesWithSteadyClockAroundIt) {
  using Steady = std::chrono::steady_clock;
  const Steady::time_point s0 = Steady::now();
  const std::uint64_t t0 = TickClock::now();
  while (Steady::now() - s0 < std::chrono::milliseconds(20)) {
  }
  const std::uint64_t t1 = TickClock::now();
  const double steady = std::chrono::duration<double>(Steady::now() - s0).count();
  const double ticks = TickClock::seconds(t1 - t0);
  // Inside the steady interval, up to the rate's error; a descheduled moment between two reads
  // can only shorten it, so the lower bound is loose.
  EXPECT_LE(ticks, steady * 1.01);
  EXPECT_GE(ticks, steady * 0.5);
}

}  // namespace
}  // namespace remat
