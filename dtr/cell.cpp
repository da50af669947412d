#include "dtr/cell.h"

#include "core/error.h"
#include "core/release.h"
#include "dtr/pool.h"
#include "dtr/trace.h"

namespace remat {

Cell::Cell(Pool& pool, std::size_t nbytes, std::uint64_t id)
    : pool_(pool), nbytes_(nbytes), id_(id) {
  pool_.on_cell_created(*this);
}

Cell::~Cell() {
  pool_.on_cell_destroyed(*this);
  if (record_) {
    // Drop this cell's entry (expired now) from the tail of its inputs' reader lists: chains
    // die last-first, so the tails go at once instead of pinning the dead cells' memory (a
    // weak_ptr keeps a make_shared block allocated) until the next prune.
    for (const auto& in : record_->inputs) {
      auto& readers = in->dependents_;
      while (!readers.empty() && readers.back().expired()) readers.pop_back();
    }
    release_later(std::move(record_));
  }
}

Device Cell::device() const {
  return pool_.device();
}

void* Cell::resident_data() {
  if (pool_.trace()) pool_.trace()->access(*this);
  pool_.ensure_resident(*this);
  return block_.ptr;
}

void Cell::mark_mutated() {
  // A write through an element accessor changes the bytes the record would recompute: readers
  // of the old value get their own copy, and this cell can no longer be recomputed.
  if (pool_.trace()) pool_.trace()->write(*this);
  if (has_live_dependents() && !pool_.freeze_readers(*this)) pool_.copy_on_write(*this);
  pool_.make_constant(*this);
  made_in_step_ = 0;  // a new value, which no call of this step made
  ++version_;
}

void Cell::freeze(StorageRole role) {
  if (role != StorageRole::Other) role_ = role;
  if (pool_.trace()) pool_.trace()->pin(*this);
  pool_.ensure_resident(*this, "freeze");
  pool_.make_constant(*this);  // the value does not change: dependents may still replay
}

bool Cell::has_live_dependents() const {
  for (const auto& d : dependents_)
    if (!d.expired()) return true;
  return false;
}

}  // namespace remat
