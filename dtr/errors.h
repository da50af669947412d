// The error thrown when one op's pinned working set cannot fit in the budget.  The pool is left
// consistent: the program may catch it, raise the budget and carry on.
#pragma once
#include <cstddef>
#include <string>

#include "core/error.h"

namespace remat {

class OutOfBudget : public Error {
 public:
  OutOfBudget(std::string op, std::size_t needed, std::size_t pinned, std::size_t budget);
  const std::string& op() const { return op_; }
  std::size_t needed() const { return needed_; }
  std::size_t pinned() const { return pinned_; }
  std::size_t budget() const { return budget_; }

 private:
  std::string op_;
  std::size_t needed_, pinned_, budget_;
};

}  // namespace remat
