// What checkpoints kept and replayed, per region, summed over the calls on this thread since
// the last reset: read it after a training step.
// Usage: reset_checkpoint_report(); step(); std::puts(checkpoint_report().to_string().c_str());
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace remat {

struct RegionReport {
  std::string checkpoint;  // the checkpoint's name
  // The region's name; "(unmarked)" is code outside any region, "(inputs)" the checkpoint's
  // inputs kept for its replay.
  std::string region;
  bool recompute = true;
  std::size_t kept_tensors = 0;  // kept by the forward for the backward or the replay
  std::size_t kept_bytes = 0;
  std::size_t kernels_replayed = 0;
  double replay_seconds = 0;  // kernel time of those replays
  std::size_t placeholders = 0;
  std::size_t side_effects_skipped = 0;  // in-place writes the replay did not repeat
};

struct CheckpointReport {
  std::size_t forwards = 0;  // checkpoint calls recorded
  std::size_t replays = 0;
  std::vector<RegionReport> regions;  // in order of first appearance

  // The row of (checkpoint, region), added when missing.
  RegionReport& row(const std::string& checkpoint, const std::string& region, bool recompute);
  const RegionReport* find(const std::string& checkpoint, const std::string& region) const;
  std::string to_string() const;  // a table
  std::string to_json() const;    // {"forwards":..,"replays":..,"regions":[{..}, ...]}
};

const CheckpointReport& checkpoint_report();
void reset_checkpoint_report();

namespace detail {
// Where checkpoint frames add their counts.
CheckpointReport& mutable_checkpoint_report();
}  // namespace detail

}  // namespace remat
