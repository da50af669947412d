// Strict validators for numeric flags.  CLI11 2.1 converts integers with strtoll/strtoull, so
// "99999999999999999999" clamps and "-1" wraps for unsigned options without an error; these
// check the text itself, so every bad value is an error that names the accepted range.
// Usage: app.add_option("--steps", steps)->check(examples::whole_in_range<long>(0, 1e9));
//        app.add_option("--lr", lr)->check(examples::positive_real());
#pragma once
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace remat::examples {

// A decimal whole number (an optional sign, then digits) in [lo, hi].
template <class T>
CLI::Validator whole_in_range(T lo, T hi) {
  const std::string range = fmt::format("a whole number from {} to {}", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        const char* b = s.data();
        const char* e = s.data() + s.size();
        if (b != e && *b == '+') ++b;
        long double v = 0;
        bool ok = b != e;
        if constexpr (std::is_signed_v<T>) {
          long long x = 0;
          const auto r = std::from_chars(b, e, x);
          ok = ok && r.ec == std::errc() && r.ptr == e;
          v = static_cast<long double>(x);
        } else {
          unsigned long long x = 0;
          const auto r = std::from_chars(b, e, x);
          ok = ok && r.ec == std::errc() && r.ptr == e;
          v = static_cast<long double>(x);
        }
        if (!ok || v < static_cast<long double>(lo) || v > static_cast<long double>(hi))
          return fmt::format("must be {}, got '{}'", range, s);
        return {};
      },
      range);
}

// A finite real number that is > lo (or >= lo when `closed`) and <= hi.
inline CLI::Validator real_in_range(double lo, bool closed, double hi, std::string description) {
  return CLI::Validator(
      [lo, closed, hi, description](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
        const bool parsed = !s.empty() && end == s.c_str() + s.size() && std::isfinite(v);
        if (!parsed || v < lo || (!closed && v == lo) || v > hi)
          return fmt::format("must be {}, got '{}'", description, s);
        return {};
      },
      description);
}
inline CLI::Validator positive_real() {
  return real_in_range(0, false, std::numeric_limits<double>::max(), "a positive number");
}
inline CLI::Validator non_negative_real() {
  return real_in_range(0, true, std::numeric_limits<double>::max(), "a number >= 0");
}

// Upper bounds of counts: far above any real run, far below where arithmetic on them overflows.
inline constexpr long kMaxSteps = 1'000'000'000'000;  // 10^12
inline constexpr std::int64_t kMaxCount = std::int64_t{1} << 40;

}  // namespace remat::examples
