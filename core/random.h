// Counter-based random numbers (Philox-4x32-10): element i of a random op is a pure function of
// (key, i), so an op's record holds only its key and a replay redraws the same numbers.
// Usage: RngKey k = next_rng_key(); float u = philox_uniform(k, i);
#pragma once
#include <array>
#include <cstdint>

namespace remat {

struct RngKey {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;  // which draw of the seed's sequence
  friend bool operator==(const RngKey&, const RngKey&) = default;
};

std::array<std::uint32_t, 4> philox4x32(RngKey key, std::uint64_t counter);

// Uniform in [0, 1) from the 24 high bits, so float and double draws agree.
inline float uniform_from_bits(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// The process-wide default generator: manual_seed resets it; each random op without an explicit
// seed takes the next key from it at dispatch time.
void manual_seed(std::uint64_t seed);
RngKey next_rng_key();

// The default generator's position: a checkpoint saves it at entry and restores it for its
// replay, so random ops draw the same keys again.
struct RngState {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
};
RngState rng_state();
void set_rng_state(RngState state);

}  // namespace remat
