// FastMod (dtr/fast_mod.h), the eviction search's draw: the same remainders as the division,
// for divisors and numerators at the edges of 64 bits and for random ones.
#include "dtr/fast_mod.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace remat {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

std::uint64_t xorshift(std::uint64_t& s) {
  s ^= s << 13, s ^= s >> 7, s ^= s << 17;
  return s;
}

TEST(FastMod, MatchesTheDivisionAtTheEdges) {
  const std::vector<std::uint64_t> divisors = {
      1, 2, 3, 7, 255, 256, 257, 1000003, 1ull << 32, (1ull << 32) + 1, kMax / 3, kMax - 1, kMax};
  for (std::uint64_t n : divisors) {
    const FastMod mod(n);
    for (std::uint64_t x :
         {std::uint64_t{0}, std::uint64_t{1}, n - 1, n, n + 1, 2 * n - 1, kMax - n, kMax - 1, kMax})
      EXPECT_EQ(mod(x), x % n) << x << " mod " << n;
  }
}

TEST(FastMod, MatchesTheDivisionOnRandomNumbers) {
  std::uint64_t s = 0x2545F4914F6CDD1Dull;
  for (int d = 0; d < 2000; ++d) {
    // Divisors of every width, as a pool's candidate counts and beyond.
    const std::uint64_t n = (xorshift(s) >> (d % 64)) | 1;
    const FastMod mod(n);
    for (int i = 0; i < 500; ++i) {
      const std::uint64_t x = xorshift(s);
      ASSERT_EQ(mod(x), x % n) << x << " mod " << n;
    }
  }
}

TEST(FastMod, RejectsZero) {
  EXPECT_THROW(FastMod{0}, std::exception);
}

}  // namespace
}  // namespace remat
