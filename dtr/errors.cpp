#include "dtr/errors.h"

namespace remat {
namespace {

std::string mib(std::size_t bytes) {
  return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / 1048576.0);
}

std::string message(const std::string& op, std::size_t needed, std::size_t budget,
                    const UnevictableBytes& h) {
  const std::string parts = fmt::format(
      "parameters {}, accumulated gradients {}, gradients waiting in the autograd engine {}, "
      "optimizer state {}, "
      "data and other constants {}, inputs and outputs of the op calls in flight {}",
      mib(h.parameters), mib(h.gradients), mib(h.engine_gradients), mib(h.optimizer_state),
      mib(h.constants), mib(h.pinned));
  const std::size_t smallest = h.total() + needed + h.cached;
  // On a device the allocator's segments can outweigh the tensors: say so, or the numbers
  // would not add up to the budget.
  const std::string allocator =
      h.cached == 0 ? std::string()
                    : fmt::format(
                          "; {} of it held by the allocator beside the tensors (free pieces of "
                          "its segments, size rounding, the rest of a new segment)",
                          mib(h.cached));
  if (needed == 0)  // lowering the budget: nothing is being allocated
    return fmt::format(
        "OutOfBudget: {}: {} bytes ({}) cannot be evicted ({}), more than the budget of {} bytes; "
        "the smallest budget that could hold them is {} bytes{}",
        op, h.total(), mib(h.total()), parts, budget, smallest, allocator);
  return fmt::format(
      "OutOfBudget: {} needs {} bytes ({}) while {} bytes ({}) cannot be evicted ({}); the budget "
      "of {} "
      "bytes is too small for this op: it needs at least {} bytes ({}{})",
      op, needed, mib(needed), h.total(), mib(h.total()), parts, budget, smallest, mib(smallest),
      allocator);
}

}  // namespace

OutOfBudget::OutOfBudget(std::string op, std::size_t needed, std::size_t budget,
                         const UnevictableBytes& held)
    : Error(message(op, needed, budget, held)),
      op_(std::move(op)),
      needed_(needed),
      budget_(budget),
      held_(held) {}

}  // namespace remat
