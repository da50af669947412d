#include "dtr/config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace remat {
namespace {
constexpr std::string_view kHeuristicNames[] = {"dtr",  "dtr-eq", "dtr-local", "lru",     "largest",
                                                "msps", "estar",  "random",    "dtr-next"};
constexpr std::string_view kPolicyNames[] = {"eager-evict", "banish", "ignore"};
constexpr std::string_view kCostNames[] = {"time", "flops", "bytes", "unit"};
constexpr double kMaxBudgetBytes = 1125899906842624.0;  // 2^50: beyond any machine, far below 2^63

template <class E, std::size_t N>
E from_name(std::string_view what, std::string_view name, const std::string_view (&names)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<E>(i);
  std::string known;
  for (auto n : names) known += (known.empty() ? "" : ", ") + std::string(n);
  REMAT_THROW("unknown {} '{}' (expected one of: {})", what, name, known);
}
}  // namespace

std::string_view heuristic_name(Heuristic h) {
  return kHeuristicNames[static_cast<int>(h)];
}
Heuristic heuristic_from_name(std::string_view n) {
  return from_name<Heuristic>("heuristic", n, kHeuristicNames);
}
const std::vector<Heuristic>& all_heuristics() {
  static const std::vector<Heuristic> all = {
      Heuristic::Dtr,  Heuristic::DtrEq, Heuristic::DtrLocal, Heuristic::Lru,    Heuristic::Largest,
      Heuristic::Msps, Heuristic::EStar, Heuristic::Random,   Heuristic::DtrNext};
  return all;
}
std::string_view policy_name(DeallocPolicy p) {
  return kPolicyNames[static_cast<int>(p)];
}
DeallocPolicy policy_from_name(std::string_view n) {
  return from_name<DeallocPolicy>("deallocation policy", n, kPolicyNames);
}
std::string_view cost_model_name(CostModel c) {
  return kCostNames[static_cast<int>(c)];
}
CostModel cost_model_from_name(std::string_view n) {
  return from_name<CostModel>("cost model", n, kCostNames);
}

std::optional<std::size_t> BudgetSpec::resolve(std::size_t peak) const {
  if (bytes) return bytes;
  if (fraction) return static_cast<std::size_t>(std::floor(*fraction * static_cast<double>(peak)));
  return std::nullopt;
}

std::string BudgetSpec::str() const {
  if (bytes) return fmt::format("{} bytes", *bytes);
  if (fraction) return fmt::format("{} of the unbudgeted peak", *fraction);
  return "none";
}

BudgetSpec parse_budget(std::string_view text) {
  std::string s(text);
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (s == "none" || s == "inf" || s == "unlimited") return {};
  const char* begin = s.data();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  REMAT_CHECK(end != begin && std::isfinite(value) && value > 0,
              "budget '{}': expected a positive number of bytes (e.g. 300MiB, 1.5GB, 123456), a "
              "fraction of the unbudgeted peak (e.g. 0.4) or 'none'",
              text);
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  const bool has_point =
      std::string_view(begin, end - begin).find_first_of(".e") != std::string_view::npos;
  if (unit.empty() && has_point) {
    REMAT_CHECK(value <= 1.0,
                "budget '{}': a fraction must lie in (0, 1]; for bytes write an integer or a unit",
                text);
    return {std::nullopt, value};
  }
  struct Unit {
    std::string_view name;
    double scale;
  };
  static constexpr Unit units[] = {{"", 1},
                                   {"b", 1},
                                   {"kb", 1e3},
                                   {"mb", 1e6},
                                   {"gb", 1e9},
                                   {"tb", 1e12},
                                   {"kib", 1024.0},
                                   {"mib", 1048576.0},
                                   {"gib", 1073741824.0},
                                   {"tib", 1099511627776.0},
                                   {"k", 1024.0},
                                   {"m", 1048576.0},
                                   {"g", 1073741824.0}};
  for (const auto& u : units) {
    if (unit == u.name) {
      const double bytes = value * u.scale;
      REMAT_CHECK(bytes >= 1, "budget '{}' is below one byte", text);
      REMAT_CHECK(bytes <= kMaxBudgetBytes,
                  "budget '{}' is more than 1 PiB (2^50 bytes), more than any machine has", text);
      return {static_cast<std::size_t>(std::llround(bytes)), std::nullopt};
    }
  }
  REMAT_THROW("budget '{}': unknown unit '{}' (use B, KB, MB, GB, KiB, MiB or GiB)", text, unit);
}

double swap_cost_per_byte(double gb_per_second, CostModel model, std::string_view cost_flag) {
  REMAT_CHECK(gb_per_second > 0 && std::isfinite(gb_per_second),
              "a swap bandwidth must be a positive number of GB/s, not {}", gb_per_second);
  REMAT_CHECK(model == CostModel::Time,
              "a swap bandwidth prices copies in seconds, which only the time cost model counts "
              "in: it needs {} time, not {}",
              cost_flag, cost_model_name(model));
  return 1 / (gb_per_second * 1e9);
}

}  // namespace remat
