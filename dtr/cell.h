// A cell of the DTR pool: the one implementation of core's Storage.  A cell owns a device buffer
// while resident and keeps the record of the op call that produced it, so the cache can free
// the buffer and recreate the bytes later.  Constants (loaded data, parameters) have no record.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/storage.h"
#include "dtr/producer.h"

namespace remat {

class Cell;
class Pool;

// One op call: producer (op and attributes, RNG key included), the cells it read with the views
// it read them through, and the cells it wrote.
struct Record {
  std::shared_ptr<const Producer> producer;
  std::vector<std::shared_ptr<Cell>> inputs;
  std::vector<TensorMeta> input_metas;
  std::vector<std::weak_ptr<Cell>> outputs;
  std::vector<TensorMeta> output_metas;
  double cost = 0;  // seconds of kernel time
  std::uint64_t id = 0;
};

enum class CellState : std::uint8_t { Resident, Evicted, Banished };

class Cell final : public Storage, public std::enable_shared_from_this<Cell> {
 public:
  Cell(Pool& pool, std::size_t nbytes, std::uint64_t id);
  ~Cell() override;
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  Device device() const override;
  std::size_t nbytes() const override { return nbytes_; }
  void* resident_data() override;

  std::uint64_t id() const { return id_; }
  CellState state() const { return state_; }
  bool resident() const { return state_ == CellState::Resident; }
  bool is_constant() const { return record_ == nullptr; }
  const std::shared_ptr<Record>& record() const { return record_; }
  int output_index() const { return output_index_; }
  // Raw pointer to the buffer; only for the dispatch path while the cell is pinned.
  void* buffer() const { return block_.ptr; }
  int pins() const { return pins_; }
  // True while any tensor handle views this cell.
  bool has_handles() const { return handles_ > 0; }

 private:
  friend class Pool;
  Pool& pool_;
  std::size_t nbytes_;
  std::uint64_t id_;
  Block block_;
  CellState state_ = CellState::Evicted;
  std::shared_ptr<Record> record_;
  int output_index_ = 0;
  int pins_ = 0;
  int handles_ = 0;  // 1 while a handle family exists
  std::weak_ptr<Storage> external_;
  std::uint64_t last_access_ = 0;
};

}  // namespace remat
