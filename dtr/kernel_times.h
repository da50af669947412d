// The time cost model's memory of kernel times: the fastest run seen so far of each op on
// inputs and outputs of the same size class (dtype, and the bit lengths of the op's flops and
// bytes moved), so the table stays small when shapes change from step to step (a TreeLSTM's
// trees, a language model's lengths), and holds at most kMaxEntries.  One measurement of a small
// kernel is noisy here (page faults, the other thread's work, cache state: relu's time on one shape
// varied 8x in a ResNet step), and the eviction heuristics compare costs, so a record's time cost
// is this estimate rather than its own raw measurement.  Usage: r.time_cost = times.observe(r,
// measured_seconds);
#pragma once
#include <cstdint>
#include <unordered_map>

#include "dtr/cell.h"

namespace remat {

class KernelTimes {
 public:
  // Folds one measured run of the record's op into the table; returns the estimate.
  double observe(const Record& record, double seconds);
  std::size_t size() const { return fastest_.size(); }
  static constexpr std::size_t kMaxEntries = 1 << 16;  // past it, a record costs its own run

 private:
  static std::uint64_t signature(const Record& record);
  std::unordered_map<std::uint64_t, double> fastest_;
};

}  // namespace remat
