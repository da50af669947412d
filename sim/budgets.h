// The simulator's --budget values: one budget, a comma-separated list, or a range lo:hi:step,
// each a byte count with units or a fraction of the replay's unbudgeted peak (parse_budget).
// Usage: for (const BudgetSpec& b : parse_budget_list("0.1:1.0:0.1")) ... b.resolve(peak) ...
#pragma once
#include <string_view>
#include <vector>

#include "dtr/config.h"

namespace remat::sim {

// Throws remat::Error naming the bad text.  A range includes both ends (within rounding), and
// its ends must be both fractions or both byte counts.
std::vector<BudgetSpec> parse_budget_list(std::string_view text);

}  // namespace remat::sim
