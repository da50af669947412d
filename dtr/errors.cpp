#include "dtr/errors.h"

namespace remat {

OutOfBudget::OutOfBudget(std::string op, std::size_t needed, std::size_t pinned, std::size_t budget)
    : Error(fmt::format("OutOfBudget: {} needs {} bytes while {} bytes are pinned and cannot be "
                        "evicted, over the budget of {} bytes; raise the budget",
                        op, needed, pinned, budget)),
      op_(std::move(op)),
      needed_(needed),
      pinned_(pinned),
      budget_(budget) {}

}  // namespace remat
