#include "core/release.h"

#include <vector>

namespace remat {

void release_later(std::shared_ptr<void> object) {
  thread_local std::vector<std::shared_ptr<void>> pending;
  thread_local bool draining = false;
  pending.push_back(std::move(object));
  if (draining) return;  // an outer call is already unwinding the chain
  draining = true;
  while (!pending.empty()) {
    auto next = std::move(pending.back());
    pending.pop_back();
    next.reset();  // may push more onto `pending`
  }
  draining = false;
}

}  // namespace remat
