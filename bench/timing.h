// The timing rule both halves of bench/op_overhead.sh share (standard C++ only, so the libtorch
// twin includes it without the framework): the median over `rounds` runs of the time per call.
// Usage: double us = bench::median_us_per_op(5, 200000, [&] { chain(); });
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace bench {

inline double median_us_per_op(int rounds, std::int64_t ops, const std::function<void()>& run) {
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    t.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        static_cast<double>(ops));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace bench
