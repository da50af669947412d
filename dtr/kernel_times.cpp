#include "dtr/kernel_times.h"

#include <algorithm>

namespace remat {
namespace {

// FNV-1a over 64-bit words.
struct Hasher {
  std::uint64_t h = 1469598103934665603ull;
  void add(std::uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  }
  void add(const TensorMeta& m) {
    add(static_cast<std::uint64_t>(m.dtype));
    add(m.shape.size());
    for (auto d : m.shape) add(static_cast<std::uint64_t>(d));
    for (auto s : m.strides) add(static_cast<std::uint64_t>(s));
  }
};

}  // namespace

std::uint64_t KernelTimes::signature(const Record& r) {
  Hasher h;
  for (char c : r.producer->name()) h.add(static_cast<unsigned char>(c));
  for (const auto& m : r.input_metas) h.add(m);
  h.add(0xFFFF);  // separates inputs from outputs
  for (const auto& m : r.output_metas) h.add(m);
  return h.h;
}

double KernelTimes::observe(const Record& record, double seconds) {
  auto [it, fresh] = fastest_.try_emplace(signature(record), seconds);
  if (!fresh) it->second = std::min(it->second, seconds);
  return it->second;
}

}  // namespace remat
