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

double KernelTimes::observe(const Record& record, double seconds) {
  const std::uint64_t key = signature(record);
  if (fastest_.size() >= kMaxEntries && !fastest_.count(key)) return seconds;
  auto [it, fresh] = fastest_.try_emplace(key, seconds);
  if (!fresh) it->second = std::min(it->second, seconds);
  return it->second;
}

}  // namespace remat
