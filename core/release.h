// Releases chains of shared objects (records holding their input cells, graph nodes holding
// their next nodes) iteratively: a 100,000-long chain would overflow the C++ stack if each
// destructor released the next one directly.  Usage: in a destructor, release_later(std::move(p)).
#pragma once
#include <memory>

namespace remat {

void release_later(std::shared_ptr<void> object);

}  // namespace remat
