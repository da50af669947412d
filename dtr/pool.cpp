#include "dtr/pool.h"

#include <map>
#include <mutex>

#include "core/error.h"

namespace remat {

Pool& Pool::of(Device device) {
  // Pools live for the whole process: cells may die during static destruction.
  static std::mutex mu;
  static auto* pools = new std::map<std::pair<int, int>, Pool*>();
  std::lock_guard lock(mu);
  auto key = std::make_pair(static_cast<int>(device.type), device.index);
  auto it = pools->find(key);
  if (it == pools->end()) it = pools->emplace(key, new Pool(device)).first;
  return *it->second;
}

Pool::Pool(Device device) : device_(device), allocator_(allocator_for(device)) {}

void Pool::materialize(Cell& cell) {
  cell.block_ = allocator_.allocate(cell.nbytes_);
  cell.state_ = CellState::Resident;
  cell.last_access_ = tick();
  stats_.resident_bytes += cell.nbytes_;
  if (stats_.resident_bytes > stats_.peak_resident_bytes)
    stats_.peak_resident_bytes = stats_.resident_bytes;
}

void Pool::free_buffer(Cell& cell, CellState next) {
  if (cell.state_ == CellState::Resident) {
    allocator_.deallocate(cell.block_);
    cell.block_ = {};
    stats_.resident_bytes -= cell.nbytes_;
  }
  cell.state_ = next;
}

std::shared_ptr<Cell> Pool::new_constant(std::size_t nbytes) {
  auto cell = std::make_shared<Cell>(*this, nbytes, ++cell_ids_);
  materialize(*cell);
  ++stats_.cells_allocated;
  return cell;
}

std::shared_ptr<Cell> Pool::new_output(std::size_t nbytes) { return new_constant(nbytes); }

void Pool::record_call(const std::shared_ptr<Record>& record,
                       std::span<const std::shared_ptr<Cell>> outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    outputs[i]->record_ = record;
    outputs[i]->output_index_ = static_cast<int>(i);
  }
  ++stats_.calls;
  stats_.compute_seconds += record->cost;
}

void Pool::pin(Cell& cell) {
  REMAT_CHECK(cell.state_ == CellState::Resident,
              "cell {} ({} bytes) is not resident and cannot be recomputed", cell.id_,
              cell.nbytes_);
  ++cell.pins_;
  cell.last_access_ = tick();
}

void Pool::unpin(Cell& cell) { --cell.pins_; }

std::shared_ptr<Storage> Pool::handle(const std::shared_ptr<Cell>& cell) {
  // The handle family is a shared_ptr aliasing the cell whose deleter tells the pool when the
  // last tensor let go; its count is the cell's external reference count.
  if (cell->handles_ > 0) {
    if (auto existing = cell->external_.lock()) return existing;
  }
  std::shared_ptr<Storage> h(cell.get(), [keep = cell](Storage*) mutable {
    keep->handles_ = 0;
    keep->pool_.on_last_handle(*keep);
    keep.reset();
  });
  cell->external_ = h;
  cell->handles_ = 1;
  return h;
}

void Pool::on_last_handle(Cell& cell) {
  // With nothing left to read it, the buffer goes; the record stays for cells computed from it.
  if (cell.pins_ == 0) free_buffer(cell, cell.is_constant() ? CellState::Banished : CellState::Evicted);
}

}  // namespace remat
