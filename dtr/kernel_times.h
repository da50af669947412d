// The time cost model's memory of kernel times, per op on inputs and outputs of the same size
// class (dtype, and the bit lengths of the op's flops and bytes moved), so the table stays small
// when shapes change from step to step (a TreeLSTM's trees, a language model's lengths), and
// holds at most kMaxEntries.  One measurement of a small kernel is noisy here (page faults, the
// other thread's work, cache state: relu's time on one shape varied 8x in a ResNet step), and
// the eviction heuristics compare costs, so a record's time cost is the fastest run seen rather
// than its own raw measurement.
// What a rebuild takes is another matter: it reads inputs long out of the cache where the
// original call read them just written (on ResNet-20 at half its peak a batch norm's rebuild
// took 2x its fastest run, a convolution's 1.1x).  dtr-next's trials price a step's rebuilds by
// the median of the op's last kRematRuns rebuilds: priced at the fastest runs, msps's score,
// which rebuilds batch norms, looked cheapest there and kept the steps, and recomputed more.
// The heuristics keep the fastest run: scoring victims by the rebuild estimate made dtr-eq on
// ResNet-20 at 0.25 of its peak rebuild 69 to 74 values a step in 4 of 12 runs, against 65 in
// each of 8.
// Usage: r.time_cost = times.observe(r, measured_seconds);
//        step_cost += times.observe_rematerialization(r, measured_seconds);
#pragma once
#include <array>
#include <cstdint>
#include <unordered_map>

#include "dtr/cell.h"

namespace remat {

class KernelTimes {
 public:
  // Folds one measured run of the record's original call into the table; returns the fastest
  // run of its class.
  double observe(const Record& record, double seconds);
  // Folds one measured rebuild of the record in; returns what a rebuild of its class takes:
  // the median of its last kRematRuns rebuilds, moved only when that median leaves 1.25x of it
  // either way (a steady price from step to step).
  double observe_rematerialization(const Record& record, double seconds);
  std::size_t size() const { return entries_.size(); }
  static constexpr std::size_t kMaxEntries = 1 << 16;  // past it, a record costs its own run
  static constexpr std::size_t kRematRuns = 8;

 private:
  struct Entry {
    double fastest = 0;
    double rebuild = 0;                       // observe_rematerialization's answer
    std::array<double, kRematRuns> remats{};  // the last rebuilds, a ring
    std::uint32_t remat_count = 0;            // all seen (the ring holds the last kRematRuns)
  };
  static std::uint64_t signature(const Record& record);
  // The entry of the record's signature, null when the table is full and it has none.
  Entry* entry(const Record& record, double seconds);
  std::unordered_map<std::uint64_t, Entry> entries_;
};

}  // namespace remat
