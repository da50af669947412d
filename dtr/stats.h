// Counters of the DTR runtime.  Pool::stats() covers the window since the last reset_stats();
// Pool::total_stats() the whole run.
#pragma once
#include <cstdint>
#include <optional>

namespace remat {

struct DtrStats {
  std::uint64_t calls = 0;       // op calls recorded
  std::uint64_t executions = 0;  // kernel runs: calls plus replays
  std::uint64_t evictions = 0;
  std::uint64_t rematerializations = 0;  // record replays
  std::uint64_t metadata_accesses = 0;   // cells scored or walked by the heuristic
  std::uint64_t candidates_drawn = 0;    // cells the searches drew (Pool::sample_size each)
  // Evictions chosen because their block joins free neighbours into one a request fits.
  std::uint64_t fragmentation_evictions = 0;
  std::uint64_t swap_outs = 0;     // values moved to host memory (DtrConfig::swap)
  std::uint64_t swap_ins = 0;      // and back
  std::uint64_t swap_bytes = 0;    // bytes copied either way
  double compute_seconds = 0;      // kernel time of the original calls
  double recompute_seconds = 0;    // kernel time of replays
  double search_seconds = 0;       // choosing victims
  double bookkeeping_seconds = 0;  // the rest of the cache's own work
  double swap_seconds = 0;         // copying to and from host memory
  std::size_t peak_resident_bytes = 0;
  std::optional<std::size_t> budget = std::nullopt;
  // At the moment of the query: what the allocator holds (resident + cached, what a budget
  // counts), and its largest free block.  held - resident is the fragmentation: on a GPU's
  // segment allocator, free pieces and rounding inside segments.
  std::size_t held_bytes = 0;
  std::size_t fragmentation_bytes = 0;
  std::size_t largest_free_block = 0;
  std::size_t swapped_bytes = 0;  // held in host memory now

  DtrStats since(const DtrStats& base) const {
    DtrStats d = *this;
    d.calls -= base.calls;
    d.executions -= base.executions;
    d.evictions -= base.evictions;
    d.rematerializations -= base.rematerializations;
    d.metadata_accesses -= base.metadata_accesses;
    d.candidates_drawn -= base.candidates_drawn;
    d.fragmentation_evictions -= base.fragmentation_evictions;
    d.swap_outs -= base.swap_outs;
    d.swap_ins -= base.swap_ins;
    d.swap_bytes -= base.swap_bytes;
    d.swap_seconds -= base.swap_seconds;
    d.compute_seconds -= base.compute_seconds;
    d.recompute_seconds -= base.recompute_seconds;
    d.search_seconds -= base.search_seconds;
    d.bookkeeping_seconds -= base.bookkeeping_seconds;
    return d;
  }
};

}  // namespace remat
