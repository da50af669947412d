// A cell of the DTR pool: the one implementation of core's Storage.  A cell owns a device buffer
// while resident and keeps the record of the op call that produced it, so the cache can free
// the buffer (evict) and recreate the bytes later (rematerialize).  Constants (loaded data,
// parameters, anything without a producer) have no record and are never evicted.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/small_vector.h"
#include "core/storage.h"
#include "dtr/config.h"
#include "dtr/producer.h"

namespace remat {

class Cell;
class Pool;

// One op call: the producer (op and attributes, RNG key included), the cells it read with the
// views it read them through, and the cells it wrote.  Costs are kept for every cost model.
struct Record {
  std::shared_ptr<const Producer> producer;
  // Inline for the common arities: a record is one allocation, lineage or not.
  SmallVector<std::shared_ptr<Cell>, 2> inputs;
  SmallVector<TensorMeta, 2> input_metas;
  SmallVector<std::weak_ptr<Cell>, 1> outputs;
  SmallVector<TensorMeta, 1> output_metas;
  double seconds = 0;    // measured kernel time of this call
  double time_cost = 0;  // the time cost model's estimate (KernelTimes, or set by the caller)
  double flops = 0;
  double bytes = 0;  // bytes read and written
  std::uint64_t id = 0;
  // dtr-next: the training step of the call and its position in it (dtr/step_log.h).
  std::uint64_t step = 0;
  std::uint32_t step_call = 0;
  // time_cost is KernelTimes' estimate (the pool measured the call), not the caller's.
  bool time_cost_estimated = false;
  // dtr-next (Heuristics::gone_ancestors_cost): the inputs the last step made, replayable,
  // with the call of their last read there, in the order of `inputs`; valid while
  // logged_inputs_epoch is the pool's gone_epoch_ (the inputs hold their records, and every
  // change of an input's record moves that epoch).  Walking them needs neither the input cells
  // nor the records of constants and older values (a cache miss each).
  struct LoggedInput {
    const Record* record;
    std::uint32_t last_read;
  };
  mutable SmallVector<LoggedInput, 2> logged_inputs;
  mutable std::uint64_t logged_inputs_epoch = 0;
  mutable std::uint64_t gone_visit = 0;  // the walk that last counted it (a stamp)

  double cost(CostModel model) const {
    switch (model) {
      case CostModel::Time:
        return time_cost > 0 ? time_cost : seconds;
      case CostModel::Flops:
        return flops;
      case CostModel::Bytes:
        return bytes;
      case CostModel::Unit:
        return 1;
    }
    return 1;
  }
};

// Swapped: the bytes live in host memory outside the budget (DtrConfig::swap); the next access
// copies them back.
enum class CellState : std::uint8_t { Resident, Evicted, Banished, Swapped };

// Union-find node of an evicted component, for the dtr-eq approximation of e*.
struct EvictedClass {
  std::shared_ptr<EvictedClass> parent;
  double cost = 0;
  std::size_t size = 0;
};

class Cell final : public Storage, public std::enable_shared_from_this<Cell> {
 public:
  Cell(Pool& pool, std::size_t nbytes, std::uint64_t id);
  ~Cell() override;
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  Device device() const override;
  std::size_t nbytes() const override { return nbytes_; }
  void* resident_data() override;
  void mark_mutated() override;
  void freeze(StorageRole role = StorageRole::Other) override;
  void set_role(StorageRole role) override { role_ = role; }
  StorageRole role() const { return role_; }

  // The pool of the cell's device, which pins and rematerializes it.
  Pool& pool() const { return pool_; }
  std::uint64_t id() const { return id_; }
  CellState state() const { return state_; }
  bool resident() const { return state_ == CellState::Resident; }
  bool swapped() const { return state_ == CellState::Swapped; }
  // Its bytes exist somewhere without recomputation: resident or swapped out.
  bool has_value() const { return resident() || swapped(); }
  bool is_constant() const { return record_ == nullptr; }
  const std::shared_ptr<Record>& record() const { return record_; }
  int output_index() const { return output_index_; }
  // Raw pointer to the buffer; only for the dispatch path while the cell is pinned.
  void* buffer() const { return block_.ptr; }
  int pins() const { return pins_; }
  // True while any tensor handle views this cell.
  bool has_handles() const { return handles_ > 0; }
  // Live tensor handles (TensorImpls) on this cell.
  long handle_count() const { return external_.use_count(); }
  // Bumped by every in-place change, so saved tensors can tell they went stale.
  std::uint64_t version() const override { return version_; }
  // A cell whose record reads this one.  The raw pointer beside the weak one lets the
  // eviction search look at a live reader without weak_ptr::lock's two atomic operations (on
  // the LSTM log under dtr-next, most of a search's walks of evicted readers); the pool is
  // used from one thread, so a reader seen unexpired stays alive while it is looked at.
  struct Reader {
    std::weak_ptr<Cell> ref;
    Cell* cell;
    Reader(const std::shared_ptr<Cell>& c) : ref(c), cell(c.get()) {}  // NOLINT: implicit
    // The reader while it lives, else null: for reading only (lock() keeps it alive).
    Cell* get() const { return ref.expired() ? nullptr : cell; }
    std::shared_ptr<Cell> lock() const { return ref.lock(); }
    bool expired() const { return ref.expired(); }
  };
  // Cells whose records read this one (pruned of dead entries as it grows).
  using Readers = SmallVector<Reader, 2>;
  const Readers& dependents() const { return dependents_; }
  bool has_live_dependents() const;
  std::uint64_t last_access() const { return last_access_; }
  // False once an input of its record was banished: it can no longer be recomputed.
  bool replayable() const { return record_ && !unreplayable_; }

 private:
  friend class Pool;
  friend struct Heuristics;
  Pool& pool_;
  std::size_t nbytes_;
  std::uint64_t id_;
  Block block_;
  void* host_ = nullptr;  // the swapped-out bytes
  CellState state_ = CellState::Evicted;
  std::shared_ptr<Record> record_;
  int output_index_ = 0;
  int pins_ = 0;
  int handles_ = 0;  // 1 while a handle family exists
  std::weak_ptr<Storage> external_;
  std::uint64_t last_access_ = 0;
  std::uint64_t last_call_ = 0;  // dtr-next: the pool's program_calls_ at its last use
  // dtr-next: the step and the call in it that made this value (step 0: unknown), kept when a
  // value that does not change loses its record (freeze), so its reads still enter the log.
  std::uint64_t made_in_step_ = 0;
  std::uint32_t made_at_call_ = 0;
  std::uint64_t version_ = 0;
  bool unreplayable_ = false;
  StorageRole role_ = StorageRole::Other;
  std::size_t cell_index_ = 0;  // in the pool's list of live cells
  Readers dependents_;
  std::size_t prune_at_ = 8;
  std::size_t candidate_index_ = std::numeric_limits<std::size_t>::max();
  std::size_t swappable_index_ = std::numeric_limits<std::size_t>::max();
  std::shared_ptr<EvictedClass> evicted_class_;
  std::uint64_t mark_ = 0;  // visit stamp for neighbourhood walks
  // Heuristics::evicted_ancestors_cost's last walk from this cell: the cost it summed, and
  // whether it ran to the end (else the cost is a lower bound).  Valid while walk_epoch_ is the
  // pool's; Pool::invalidate_walks clears it when the walk would change.
  double walk_cost_ = 0;
  std::uint64_t walk_epoch_ = 0;
  // Answers about the last step's log, each valid while its epoch is the pool's gone_epoch_
  // (the same log and records; evictions do not change them):
  // - Heuristics::gone_cost's, for a next use at call gone_at_ (gone_epoch_);
  // - Heuristics::next_use's next read next_at_ (kNoNextUse: none), found from call next_from_
  //   and the answer until the step passes it (next_epoch_);
  // - the cell's last read, for Heuristics::gone_ancestors_cost (last_read_epoch_).
  static constexpr std::uint32_t kNoNextUse = std::numeric_limits<std::uint32_t>::max();
  mutable double gone_cost_ = 0;
  mutable std::uint64_t gone_epoch_ = 0, next_epoch_ = 0, last_read_epoch_ = 0;
  // Side by side: no padding between the four.
  mutable std::uint32_t gone_at_ = 0, next_from_ = 0, next_at_ = kNoNextUse,
                        last_read_ = kNoNextUse;
  std::uint64_t invalidate_mark_ = 0;  // Pool::invalidate_walks walked its readers at this stamp
  bool walk_complete_ = false;
};

}  // namespace remat
