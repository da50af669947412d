#include "sim/budgets.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace remat::sim {
namespace {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t pos = 0;
  while (true) {
    const std::size_t end = text.find(sep, pos);
    parts.push_back(
        text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos));
    if (end == std::string_view::npos) return parts;
    pos = end + 1;
  }
}

std::vector<BudgetSpec> parse_range(std::string_view text) {
  const auto parts = split(text, ':');
  REMAT_CHECK(parts.size() == 3, "budget range '{}': expected lo:hi:step (e.g. 0.1:1.0:0.1)", text);
  const BudgetSpec lo = parse_budget(parts[0]), hi = parse_budget(parts[1]);
  REMAT_CHECK(!lo.none() && !hi.none(), "budget range '{}': its ends must be budgets, not 'none'",
              text);
  REMAT_CHECK(lo.fraction.has_value() == hi.fraction.has_value(),
              "budget range '{}': both ends must be fractions or both byte counts", text);
  std::vector<BudgetSpec> out;
  if (lo.fraction) {
    // A step is a fraction too, though it may be written without a decimal point.
    const std::string step_text(parts[2]);
    char* end = nullptr;
    const double step = std::strtod(step_text.c_str(), &end);
    REMAT_CHECK(end != step_text.c_str() && *end == '\0' && step > 0 && std::isfinite(step),
                "budget range '{}': step '{}' must be a positive number", text, parts[2]);
    const double a = *lo.fraction, b = *hi.fraction;
    REMAT_CHECK(a <= b, "budget range '{}': the low end is above the high end", text);
    const double steps = std::floor((b - a) / step + 1e-9);  // checked before it becomes an integer
    REMAT_CHECK(steps < 100000, "budget range '{}' has too many steps (at most 100000)", text);
    const auto n = static_cast<std::size_t>(steps);
    for (std::size_t k = 0; k <= n; ++k) {
      // Rounded to 1e-9 so 0.1 + 2 * 0.1 prints and compares as 0.3.
      const double f = std::round((a + static_cast<double>(k) * step) * 1e9) / 1e9;
      out.push_back({std::nullopt, std::min(f, 1.0)});
    }
  } else {
    const BudgetSpec step = parse_budget(parts[2]);
    REMAT_CHECK(step.bytes && *step.bytes > 0, "budget range '{}': step '{}' must be a byte count",
                text, parts[2]);
    REMAT_CHECK(*lo.bytes <= *hi.bytes, "budget range '{}': the low end is above the high end",
                text);
    REMAT_CHECK((*hi.bytes - *lo.bytes) / *step.bytes < 100000,
                "budget range '{}' has too many steps", text);
    for (std::size_t b = *lo.bytes; b <= *hi.bytes; b += *step.bytes)
      out.push_back({b, std::nullopt});
  }
  return out;
}

}  // namespace

std::vector<BudgetSpec> parse_budget_list(std::string_view text) {
  std::vector<BudgetSpec> out;
  for (std::string_view part : split(text, ',')) {
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    REMAT_CHECK(!part.empty(), "budget list '{}' has an empty entry", text);
    if (part.find(':') != std::string_view::npos) {
      for (const auto& b : parse_range(part)) out.push_back(b);
    } else {
      out.push_back(parse_budget(part));
    }
  }
  return out;
}

}  // namespace remat::sim
