#include "dtr/kernel_times.h"

#include <algorithm>
#include <bit>

namespace remat {
namespace {

// FNV-1a over 64-bit words.
struct Hasher {
  std::uint64_t h = 1469598103934665603ull;
  void add(std::uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  }
};

std::uint64_t bit_length(double v) {
  return static_cast<std::uint64_t>(
      std::bit_width(static_cast<std::uint64_t>(std::clamp(v, 0.0, 9.0e18))));
}

constexpr double kSettle = 1.25;

}  // namespace

std::uint64_t KernelTimes::signature(const Record& r) {
  Hasher h;
  for (char c : r.producer->name()) h.add(static_cast<unsigned char>(c));
  h.add(r.input_metas.size());
  h.add(r.output_metas.empty() ? 0 : static_cast<std::uint64_t>(r.output_metas[0].dtype) + 1);
  h.add(bit_length(r.flops));
  h.add(bit_length(r.bytes));
  return h.h;
}

KernelTimes::Entry* KernelTimes::entry(const Record& record, double seconds) {
  const std::uint64_t key = signature(record);
  if (entries_.size() >= kMaxEntries) {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
  }
  auto [it, fresh] = entries_.try_emplace(key);
  if (fresh) it->second.fastest = seconds;
  return &it->second;
}

double KernelTimes::observe(const Record& record, double seconds) {
  Entry* e = entry(record, seconds);
  if (!e) return seconds;
  e->fastest = std::min(e->fastest, seconds);
  return e->fastest;
}

double KernelTimes::observe_rematerialization(const Record& record, double seconds) {
  Entry* e = entry(record, seconds);
  if (!e) return seconds;
  e->fastest = std::min(e->fastest, seconds);
  e->remats[e->remat_count % kRematRuns] = seconds;
  ++e->remat_count;
  if (e->remat_count == 1) return e->rebuild = seconds;
  // The median (the lower one of an even count): one slow run in a few moves it little.
  const std::size_t n = std::min<std::size_t>(e->remat_count, kRematRuns);
  std::array<double, kRematRuns> runs = e->remats;
  const auto mid = runs.begin() + static_cast<std::ptrdiff_t>((n - 1) / 2);
  std::nth_element(runs.begin(), mid, runs.begin() + static_cast<std::ptrdiff_t>(n));
  if (*mid > kSettle * e->rebuild || *mid < e->rebuild / kSettle) e->rebuild = *mid;
  return e->rebuild;
}

}  // namespace remat
