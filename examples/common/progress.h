// Progress display and the final JSON summary shared by the training examples.  On a terminal
// the progress line redraws in place; otherwise it prints a plain line every `every` steps.
// Usage: Progress p(total); p.update(step, loss, acc, images_per_s, resident); p.finish();
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/scratch.h"
#include "dtr/pool.h"
#include "examples/common/dtr_flags.h"

namespace remat::examples {

class Progress {
 public:
  explicit Progress(long total, long every = 50)
      : total_(total), every_(every), tty_(isatty(fileno(stdout))) {}

  void update(long step, double loss, double accuracy, double images_per_s, std::size_t resident) {
    update_text(step, fmt::format("loss {:.4f}  acc {:.3f}  {:.0f} img/s  resident {:.1f} MiB",
                                  loss, accuracy, images_per_s, resident / 1048576.0));
  }
  // A line with the example's own figures.
  void update_text(long step, const std::string& stats) {
    if (tty_) {
      const int width = 30;
      const int filled = total_ > 0 ? static_cast<int>(width * step / total_) : 0;
      std::printf("\r[%s%s] %ld/%ld  %s", std::string(filled, '#').c_str(),
                  std::string(width - filled, '.').c_str(), step, total_, stats.c_str());
      std::fflush(stdout);
    } else if (step == 1 || step % every_ == 0 || step == total_) {
      std::printf("step %ld/%ld  %s\n", step, total_, stats.c_str());
      std::fflush(stdout);
    }
  }
  void finish() {
    if (tty_) std::printf("\n");
  }

 private:
  long total_, every_;
  bool tty_;
};

// The median of the step times after the first `warmup` (all of them when there are no more):
// the steady step, without first steps' allocations and library start-up.
inline double median_after(std::vector<double> ms, std::size_t warmup) {
  if (ms.size() > warmup) ms.erase(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(warmup));
  if (ms.empty()) return 0;
  std::sort(ms.begin(), ms.end());
  const std::size_t n = ms.size();
  return n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
}

// The DTR part of every example's final JSON line, from the pool's stats or from counters an
// example adjusted (train_resnet leaves out its --plot evaluations).
inline nlohmann::json dtr_summary(const DtrStats& s, const DtrFlags& flags) {
  nlohmann::json j;
  j["peak_resident_bytes"] = s.peak_resident_bytes;
  j["scratch_bytes"] = scratch_bytes();  // kernels' per-thread workspaces, outside the budget
  j["budget_bytes"] = s.budget ? nlohmann::json(*s.budget) : nlohmann::json(nullptr);
  j["unbudgeted_peak_bytes"] =
      flags.unbudgeted_peak ? nlohmann::json(*flags.unbudgeted_peak) : nlohmann::json(nullptr);
  j["heuristic"] = flags.heuristic;
  j["evictions"] = s.evictions;
  j["rematerializations"] = s.rematerializations;
  j["recompute_ms"] = s.recompute_seconds * 1e3;
  j["overhead_ms"] = (s.search_seconds + s.bookkeeping_seconds) * 1e3;
  j["search_ms"] = s.search_seconds * 1e3;  // the two parts of overhead_ms
  j["bookkeeping_ms"] = s.bookkeeping_seconds * 1e3;
  j["candidates_drawn"] = s.candidates_drawn;
  if (flags.swap) {
    j["swap_outs"] = s.swap_outs;
    j["swap_ins"] = s.swap_ins;
    j["swap_bytes"] = s.swap_bytes;
    j["swap_ms"] = s.swap_seconds * 1e3;
  }
  return j;
}
inline nlohmann::json dtr_summary(const Pool& pool, const DtrFlags& flags) {
  return dtr_summary(pool.stats(), flags);
}

}  // namespace remat::examples
