// Internal: float32 exp, log, tanh and sigmoid written as straight-line code (no branches, no
// calls, no table lookups) so that the compiler vectorises any loop over them; the C library's
// versions are calls, one element at a time.  Cephes' polynomials with Cody-Waite range
// reduction: at most 2 ulp from the correctly rounded result over every float (the exhaustive
// check is in tests/ops/vec_math_test.cpp), inf, NaN, zeros and subnormals as the C library.
// The same code runs for every element whatever the loop's alignment, so replays are exact.
// float64 keeps the C library (gradient checks want its accuracy).
// Usage: for (i...) y[i] = detail::vexp(x[i]);   // T = float or double
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace remat::detail {

namespace vec_math {

// 2^n for integral n in [-126, 127], built in the exponent field.
[[gnu::always_inline]] inline float pow2i(std::int32_t n) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(n + 127) << 23);
}

// Rounds to the nearest integer (ties to even) for |x| < 2^22, without a call.
[[gnu::always_inline]] inline float round_nearest(float x) {
  constexpr float kMagic = 12582912.f;  // 1.5 * 2^23
  return (x + kMagic) - kMagic;
}

[[gnu::always_inline]] inline float exp_f32(float x) {
  constexpr float kHi = 88.72283935546875f;  // above: +inf (e^x > FLT_MAX)
  constexpr float kLo = -103.972084045410f;  // below: 0 (e^x < half the smallest subnormal)
  // NaN clamps to kLo (every comparison is false), so the conversion to int below is defined;
  // the last line returns the NaN.
  const float xc = x > kLo ? (x < kHi ? x : kHi) : kLo;
  // x = n ln2 + r with |r| <= ln2 / 2; ln2 in two parts so n ln2 is exact.
  const float n = round_nearest(xc * 1.44269504088896341f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.f;
  // 2^n in two factors, so that n down to -150 (subnormal results) stays representable.
  const auto ni = static_cast<std::int32_t>(n);
  const std::int32_t n1 = ni >> 1, n2 = ni - n1;
  float y = p * pow2i(n1) * pow2i(n2);
  y = x > kHi ? std::numeric_limits<float>::infinity() : y;
  y = x < kLo ? 0.f : y;
  return x != x ? x : y;
}

[[gnu::always_inline]] inline float log_f32(float x) {
  // Subnormals are scaled into the normal range first.
  const bool sub = x < 1.17549435e-38f;
  const float xs = sub ? x * 8388608.f : x;  // 2^23
  const auto bits = std::bit_cast<std::uint32_t>(xs);
  std::int32_t e = static_cast<std::int32_t>(bits >> 23) - 126 - (sub ? 23 : 0);
  // Mantissa in [0.5, 1); below sqrt(1/2) it is doubled so that m - 1 lies in [-0.29, 0.41].
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f000000u);
  const bool small = m < 0.707106781186547524f;
  e -= small ? 1 : 0;
  m = small ? m + m - 1.f : m - 1.f;
  const float z = m * m;
  float p = 7.0376836292e-2f;
  p = p * m + -1.1514610310e-1f;
  p = p * m + 1.1676998740e-1f;
  p = p * m + -1.2420140846e-1f;
  p = p * m + 1.4249322787e-1f;
  p = p * m + -1.6668057665e-1f;
  p = p * m + 2.0000714765e-1f;
  p = p * m + -2.4999993993e-1f;
  p = p * m + 3.3333331174e-1f;
  const float fe = static_cast<float>(e);
  float y = p * m * z;
  y = y + fe * -2.12194440e-4f;
  y = y - 0.5f * z;
  y = m + y;
  y = y + fe * 0.693359375f;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  y = x == 0.f ? -kInf : y;
  y = x < 0.f ? std::numeric_limits<float>::quiet_NaN() : y;
  y = x == kInf ? kInf : y;
  return x != x ? x : y;
}

[[gnu::always_inline]] inline float tanh_f32(float x) {
  const float ax = x < 0.f ? -x : x;
  // Small |x|: an odd polynomial; elsewhere 1 - 2 / (e^2|x| + 1), which is 1 once e^2|x| is inf.
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z + -5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z + -3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.f - 2.f / (exp_f32(ax + ax) + 1.f);
  const float y = ax >= 0.625f ? (x < 0.f ? -big : big) : small;
  return x != x ? x : y;
}

// From e = e^-|x| <= 1, so that neither side overflows: 1 / (1 + e) for x >= 0, e / (1 + e)
// below (down to the subnormal results near x = -103).
[[gnu::always_inline]] inline float sigmoid_f32(float x) {
  const float e = exp_f32(x < 0.f ? x : -x);
  const float d = 1.f + e;
  return x >= 0.f ? 1.f / d : (x != x ? x : e / d);
}

}  // namespace vec_math

template <class T>
[[gnu::always_inline]] inline T vexp(T x) {
  if constexpr (std::is_same_v<T, float>)
    return vec_math::exp_f32(x);
  else
    return std::exp(x);
}
template <class T>
[[gnu::always_inline]] inline T vlog(T x) {
  if constexpr (std::is_same_v<T, float>)
    return vec_math::log_f32(x);
  else
    return std::log(x);
}
template <class T>
[[gnu::always_inline]] inline T vtanh(T x) {
  if constexpr (std::is_same_v<T, float>)
    return vec_math::tanh_f32(x);
  else
    return std::tanh(x);
}
template <class T>
[[gnu::always_inline]] inline T vsigmoid(T x) {
  if constexpr (std::is_same_v<T, float>)
    return vec_math::sigmoid_f32(x);
  else
    return T(1) / (T(1) + std::exp(-x));
}

}  // namespace remat::detail
