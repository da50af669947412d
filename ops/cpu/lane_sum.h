// Internal: a sum (and a dot product) in double with eight independent lanes.  The compiler
// vectorises it (a plain double loop is serialised by its single dependency chain), and the order
// is fixed, so the result is bit-reproducible whatever the thread count.  Used by normalisation and
// softmax.
#pragma once
#include <cstdint>

namespace remat::detail {

template <class T>
double lane_sum(const T* p, std::int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += static_cast<double>(p[i + l]);
  for (; i < n; ++i) acc[i & 7] += static_cast<double>(p[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// sum_i a[i] * b[i] in double, in the same eight-lane order.
template <class T>
double lane_dot(const T* a, const T* b, std::int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l)
      acc[l] += static_cast<double>(a[i + l]) * static_cast<double>(b[i + l]);
  for (; i < n; ++i) acc[i & 7] += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace remat::detail
