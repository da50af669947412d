// SGD with momentum on a ResNet-20 (batch 64, 32x32 RGB, as in He et al.) for a few steps, on
// the CPU pool with the flops cost model (deterministic eviction choices): every step's loss,
// then the parameters, momentum and buffers, at a fractional budget or without one.  Shared by
// the tests that train it under tight budgets (swapping, dtr-next's trial scores).
// Usage: Resnet20Run r = train_resnet20({.fraction = 0.25, .steps = 5});
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

#include "dtr/config.h"
#include "dtr/stats.h"

namespace remat {

struct Resnet20Options {
  std::optional<double> fraction = std::nullopt;  // of the peak, measured over the first steps
  bool swap = false;
  Heuristic heuristic = Heuristic::DtrEq;
  int steps = 4;
};

struct Resnet20Run {
  std::vector<float> values;  // losses, then parameters and buffers
  DtrStats stats;             // over the budgeted steps
  std::size_t budget = 0;
  bool trials_settled = false;  // every one of dtr-next's scores had a trial step
};

// Throws OutOfBudget, as the pool does, when a step cannot fit.
Resnet20Run train_resnet20(const Resnet20Options& options);

}  // namespace remat
