#include "ops/profiler.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

namespace remat {
namespace {
std::atomic<bool> g_enabled{false};
std::mutex g_mutex;
std::map<std::string, OpProfileEntry, std::less<>>& table() {
  static auto* t = new std::map<std::string, OpProfileEntry, std::less<>>();
  return *t;
}
}  // namespace

void OpProfiler::enable(bool on) {
  g_enabled.store(on, std::memory_order_relaxed);
}

bool OpProfiler::enabled() {
  return g_enabled.load(std::memory_order_relaxed);
}

void OpProfiler::reset() {
  std::lock_guard lock(g_mutex);
  table().clear();
}

std::int64_t OpProfiler::minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

void OpProfiler::add(std::string_view op, double seconds, double flops, std::int64_t page_faults) {
  std::lock_guard lock(g_mutex);
  auto it = table().find(op);
  if (it == table().end())
    it = table().emplace(std::string(op), OpProfileEntry{std::string(op)}).first;
  ++it->second.calls;
  it->second.seconds += seconds;
  it->second.flops += flops;
  it->second.page_faults += page_faults;
}

std::vector<OpProfileEntry> OpProfiler::entries() {
  std::vector<OpProfileEntry> out;
  {
    std::lock_guard lock(g_mutex);
    for (const auto& [name, e] : table()) out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name;
  });
  return out;
}

std::string OpProfiler::report(std::size_t rows) {
  const auto all = entries();
  double total = 0;
  for (const auto& e : all) total += e.seconds;
  std::string s = fmt::format("{:<28} {:>8} {:>10} {:>6} {:>9} {:>8}\n", "op", "calls", "ms",
                              "share", "GFLOP/s", "faults");
  for (std::size_t i = 0; i < all.size() && i < rows; ++i) {
    const auto& e = all[i];
    s += fmt::format("{:<28} {:>8} {:>10.2f} {:>5.1f}% {:>9.1f} {:>8}\n", e.name, e.calls,
                     e.seconds * 1e3, total > 0 ? 100 * e.seconds / total : 0.0,
                     e.seconds > 0 ? e.flops / e.seconds / 1e9 : 0.0, e.page_faults);
  }
  s += fmt::format("{:<28} {:>8} {:>10.2f}\n", "all kernels", "", total * 1e3);
  return s;
}

}  // namespace remat
