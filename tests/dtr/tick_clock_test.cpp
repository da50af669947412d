// TickClock (dtr/tick_clock.h), the clock of the pool's search and bookkeeping times: an
// interval read on it lies within the same interval read on steady_clock around it (its rate,
// measured once, is the right one to well within 2x), and a backward step counts nothing.
#include "dtr/tick_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

namespace remat {
namespace {

TEST(TickClock, AnIntervalAgreesWithSteadyClockAroundIt) {
  using Steady = std::chrono::steady_clock;
  const Steady::time_point s0 = Steady::now();
  const std::uint64_t t0 = TickClock::now();
  while (Steady::now() - s0 < std::chrono::milliseconds(20)) {
  }
  const double ticks = TickClock::seconds_since(t0);
  const double steady = std::chrono::duration<double>(Steady::now() - s0).count();
  // Inside the steady interval, up to the rate's error; a descheduled moment between two reads
  // can only shorten it, so the lower bound is loose.
  EXPECT_LE(ticks, steady * 1.01);
  EXPECT_GE(ticks, steady * 0.5);
}

// A counter read on another core may lag by a few ticks: an interval that would end before it
// began counts nothing, not 2^64 ticks.
TEST(TickClock, AReadingAheadOfTheCounterCountsNothing) {
  const std::uint64_t later = TickClock::now() + (std::uint64_t{1} << 40);
  EXPECT_EQ(TickClock::seconds_since(later), 0.0);
  EXPECT_GE(TickClock::seconds_since(TickClock::now()), 0.0);
}

}  // namespace
}  // namespace remat
