#include "sim/program.h"

namespace remat::sim {

double event_cost(const Event& e, CostModel model) {
  switch (model) {
    case CostModel::Time:
      return e.seconds;
    case CostModel::Flops:
      return e.flops;
    case CostModel::Bytes:
      return e.bytes;
    case CostModel::Unit:
      return 1;
  }
  return 1;
}

double total_cost(const Program& program, CostModel model) {
  double sum = 0;
  for (const Event& e : program.events)
    if (e.kind == EventKind::Call || e.kind == EventKind::Mutate) sum += event_cost(e, model);
  return sum;
}

}  // namespace remat::sim
