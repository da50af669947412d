// The error thrown when one op's pinned working set cannot fit in the budget.  The pool is left
// consistent: the program may catch it, raise the budget and carry on.  Its message breaks the
// bytes that cannot be evicted down by what they hold and names the smallest budget that could
// let the op run.
#pragma once
#include <cstddef>
#include <string>

#include "core/error.h"

namespace remat {

// Resident bytes that eviction cannot free at one moment, by role (core/storage.h).
struct UnevictableBytes {
  std::size_t parameters = 0;
  std::size_t gradients = 0;         // accumulated into leaves' grad()
  std::size_t engine_gradients = 0;  // waiting in the autograd engine for their node
  std::size_t optimizer_state = 0;
  std::size_t constants = 0;  // data, buffers and other values without a record
  std::size_t pinned = 0;     // inputs and outputs of the op calls in flight
  // Free blocks the allocator still holds (not unevictable); in an OutOfBudget for an
  // allocation, what the allocator would hold beyond the tensors once it is served (free pieces
  // of segments in use, size rounding, the rest of a fresh segment).
  std::size_t cached = 0;
  std::size_t total() const {
    return parameters + gradients + engine_gradients + optimizer_state + constants + pinned;
  }
};

class OutOfBudget : public Error {
 public:
  OutOfBudget(std::string op, std::size_t needed, std::size_t budget, const UnevictableBytes& held);
  const std::string& op() const { return op_; }
  std::size_t needed() const { return needed_; }
  std::size_t pinned() const { return held_.total(); }
  std::size_t budget() const { return budget_; }
  const UnevictableBytes& unevictable() const { return held_; }
  // A lower bound on a budget that lets this op run: what cannot be evicted, what it needs, and
  // what the allocator holds beside them to serve it.
  std::size_t smallest_budget() const { return held_.total() + needed_ + held_.cached; }

 private:
  std::string op_;
  std::size_t needed_, budget_;
  UnevictableBytes held_;
};

}  // namespace remat
