#include "dtr/cell.h"

#include "core/error.h"
#include "core/release.h"
#include "dtr/pool.h"

namespace remat {

Cell::Cell(Pool& pool, std::size_t nbytes, std::uint64_t id)
    : pool_(pool), nbytes_(nbytes), id_(id) {}

Cell::~Cell() {
  if (state_ == CellState::Resident) pool_.free_buffer(*this, CellState::Banished);
  if (record_) release_later(std::move(record_));
}

Device Cell::device() const { return pool_.device(); }

void* Cell::resident_data() {
  REMAT_CHECK(state_ == CellState::Resident,
              "cell {} ({} bytes) is not resident and cannot be recomputed", id_, nbytes_);
  last_access_ = pool_.tick();
  return block_.ptr;
}

}  // namespace remat
