// The DTR pool of one device: every tensor buffer is a cell allocated here.  The pool counts
// resident bytes and their peak exactly, and hands out the tensor-facing storage handles whose
// lifetime tells the cache when user code has let go of a cell.
// Usage: auto& pool = Pool::of(Device::cpu()); auto c = pool.new_constant(bytes);
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "dtr/cell.h"

namespace remat {

struct PoolStats {
  std::size_t resident_bytes = 0;
  std::size_t peak_resident_bytes = 0;
  std::uint64_t cells_allocated = 0;
  std::uint64_t calls = 0;          // op calls recorded
  double compute_seconds = 0;       // kernel time of those calls
};

class Pool {
 public:
  static Pool& of(Device device);
  explicit Pool(Device device);
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  Device device() const { return device_; }

  // A resident cell with no producer; it is never evicted.
  std::shared_ptr<Cell> new_constant(std::size_t nbytes);
  // Resident cells for the outputs of one op call, before the kernel runs.
  std::shared_ptr<Cell> new_output(std::size_t nbytes);
  // After the kernel ran: binds outputs to the call's record and accounts its cost.
  void record_call(const std::shared_ptr<Record>& record,
                   std::span<const std::shared_ptr<Cell>> outputs);

  // Pins a cell for the duration of one kernel: it must be resident and stays so.
  void pin(Cell& cell);
  void unpin(Cell& cell);

  // The storage handle tensors hold.  All handles of a cell share one count; when the last one
  // dies the cell's buffer is released (the cell's record survives while others read it).
  std::shared_ptr<Storage> handle(const std::shared_ptr<Cell>& cell);

  const PoolStats& stats() const { return stats_; }
  std::size_t resident_bytes() const { return stats_.resident_bytes; }
  std::size_t peak_resident_bytes() const { return stats_.peak_resident_bytes; }
  // Starts a new peak measurement from the current resident bytes.
  void reset_peak() { stats_.peak_resident_bytes = stats_.resident_bytes; }
  std::uint64_t next_record_id() { return ++record_ids_; }
  std::uint64_t tick() { return ++clock_; }

 private:
  friend class Cell;
  void materialize(Cell& cell);  // allocates the buffer of a non-resident cell
  void free_buffer(Cell& cell, CellState next);
  void on_last_handle(Cell& cell);

  Device device_;
  Allocator& allocator_;
  PoolStats stats_;
  std::uint64_t cell_ids_ = 0;
  std::uint64_t record_ids_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace remat
