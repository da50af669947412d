#include "core/random.h"

#include <atomic>

namespace remat {

std::array<std::uint32_t, 4> philox4x32(RngKey key, std::uint64_t counter) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(key.stream), c3 = static_cast<std::uint32_t>(key.stream >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(key.seed), k1 = static_cast<std::uint32_t>(key.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const std::uint32_t n1 = static_cast<std::uint32_t>(p1);
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const std::uint32_t n3 = static_cast<std::uint32_t>(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += kW0, k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

namespace {
std::atomic<std::uint64_t> g_seed{0x5EEDu};
std::atomic<std::uint64_t> g_stream{0};
}  // namespace

void manual_seed(std::uint64_t seed) {
  g_seed = seed;
  g_stream = 0;
}

RngKey next_rng_key() { return {g_seed.load(), g_stream.fetch_add(1)}; }

RngState rng_state() { return {g_seed.load(), g_stream.load()}; }

void set_rng_state(RngState state) {
  g_seed = state.seed;
  g_stream = state.stream;
}

}  // namespace remat
