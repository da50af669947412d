// A timeline of the pool: one sample after every recorded op call (each non-view call, and each
// tensor an in-place call writes), for pictures of memory over a training step.
// Usage: pool.start_timeline(); train_step(); std::vector<TimelineSample> t = pool.stop_timeline();
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace remat {

struct TimelineSample {
  std::uint64_t call = 0;          // the call's index since start_timeline, from 0
  std::string op;                  // the op's name
  std::size_t resident_bytes = 0;  // Pool::resident_bytes() after the call
  std::size_t cached_bytes = 0;    // the allocator's cached free blocks, which a budget counts too
  // Since start_timeline, up to and including this call.  Work between calls (an element read
  // that rematerializes, a budget set between steps) counts towards the next call.
  std::uint64_t evictions = 0;
  std::uint64_t rematerializations = 0;
};

}  // namespace remat
