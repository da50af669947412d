// The DTR pool of one device: every tensor buffer is a cell allocated here.  Under a budget it
// evicts cells chosen by a heuristic and rematerializes them on access by replaying their
// records, so resident bytes never exceed the budget.  It also counts resident bytes and their
// peak exactly and hands out the storage handles whose lifetime drives deallocation policies.
// Usage: auto& pool = Pool::of(Device::cpu()); pool.set_budget(300 << 20);
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "dtr/cell.h"
#include "dtr/config.h"
#include "dtr/errors.h"
#include "dtr/heuristics.h"
#include "dtr/kernel_times.h"
#include "dtr/score_choice.h"
#include "dtr/stats.h"
#include "dtr/step_log.h"
#include "dtr/timeline.h"

namespace remat {

class Trace;

class Pool {
 public:
  static Pool& of(Device device);
  explicit Pool(Device device, Allocator* allocator = nullptr);
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool();

  Device device() const { return device_; }

  // ---- configuration
  const DtrConfig& config() const { return config_; }
  void configure(const DtrConfig& config);
  // Unlimited when empty.  Lowering the budget evicts at once; throws OutOfBudget (and keeps
  // the old budget) when the unevictable cells alone exceed it.  Cancels a pending fraction.
  void set_budget(std::optional<std::size_t> bytes);
  std::optional<std::size_t> budget() const { return config_.budget; }
  // A budget that is a fraction of the unbudgeted steady-state peak.  The pool runs unbudgeted
  // until the end of step `measure_step` (end_step() marks the end of each training step; the
  // first step also creates the optimizer's state, so the second is the first steady one), then
  // sets the budget to floor(fraction x that step's peak resident bytes).
  // Usage: pool.set_budget_fraction(0.4); for (...) { train_step(); pool.end_step(); }
  void set_budget_fraction(double fraction, int measure_step = 2);
  // Marks the end of a training step.  Returns the budget when this call resolved a pending
  // fraction (it may throw OutOfBudget then, as set_budget does).  Under dtr-next the step's
  // calls and uses become the prediction for the next step.
  std::optional<std::size_t> end_step();
  // dtr-next's prediction (dtr/step_log.h): the last step's calls and uses.  The offline
  // simulator seeds it from an earlier replay of the same program.
  const StepLog& last_step_log() const { return last_step_; }
  void set_last_step_log(StepLog log) {
    last_step_ = std::move(log);
    invalidate_all_walks();  // caches_walks() may change
  }
  // dtr-next's choice among its scores and dtr-eq's (dtr/score_choice.h), which the simulator
  // carries from one replay to the next as it carries the step log.
  const ScoreChoice& score_choice() const { return score_choice_; }
  void set_score_choice(const ScoreChoice& choice) {
    score_choice_ = choice;
    invalidate_all_walks();
  }
  // A step the simulator abandoned (its thrash limit): its score's trial failed.
  void fail_step();
  // The peak a fractional budget was resolved from, once it was.
  std::optional<std::size_t> measured_peak() const { return measured_peak_; }
  void set_heuristic(Heuristic h) {
    config_.heuristic = h;
    invalidate_all_walks();
    if (config_.budget) build_evicted_classes();
  }
  void set_policy(DeallocPolicy p) { config_.policy = p; }
  // Another cost model starts dtr-next's trials over: their costs are in its units, and only
  // the time cost model prices searches (the small sample's trials).
  void set_cost_model(CostModel c) {
    config_.cost = c;
    score_choice_ = ScoreChoice(prices_searches());
    invalidate_all_walks();
  }
  // DtrConfig::swap and swap_cost_per_byte.
  void set_swap(bool on, double cost_per_byte = 0);

  // ---- cells
  // A resident cell with no producer; it is never evicted.
  std::shared_ptr<Cell> new_constant(std::size_t nbytes, std::string_view op = "constant");
  // A resident cell for an output of the op call `op`, before its kernel runs; evicts to make
  // room.  Until record_call it is unevictable.
  std::shared_ptr<Cell> new_output(std::size_t nbytes, std::string_view op);
  // After the kernel ran: binds outputs to the call's record, accounts and traces it.
  void record_call(const std::shared_ptr<Record>& record,
                   std::span<const std::shared_ptr<Cell>> outputs);

  // Makes the cell resident (rematerializing it and, iteratively, whatever it needs) and pins
  // it: it stays resident until unpin.
  void pin(Cell& cell, std::string_view op = "access");
  void unpin(Cell& cell);
  // Makes the cell resident without pinning it.
  void ensure_resident(Cell& cell, std::string_view op = "access");
  // Frees a resident, unpinned, replayable cell's buffer; it comes back on its next access.
  void evict(Cell& cell);
  // The cell's bytes are about to change in place.  Pins it resident; when records may still
  // replay from its old value, the old value moves to a new cell first.  With `overwrite`
  // (every byte is written from inputs that include the old value) that cell keeps the old
  // buffer and the returned cell is it, so the kernel reads the old bytes from there and
  // writes a fresh buffer; otherwise the bytes are copied and nullptr is returned (the kernel
  // runs in place).  finish_write unpins, turns the cell into a constant (it can no longer be
  // recomputed by its record) and bumps its version.
  // Before any copy: the readers of the old value, followed through evicted readers that no
  // tensor holds, end in resident cells.  When none of the evicted ones is held and the resident
  // ones hold fewer bytes than the cell, those are frozen instead (constants with their exact
  // values) and the evicted ones dropped for good, so nothing can replay from the old value:
  // an optimizer step taken while the step's loss is alive, PyTorch's idiom, copies no parameter.
  std::shared_ptr<Cell> begin_write(Cell& cell, bool overwrite, std::string_view op);
  void finish_write(Cell& cell, const Record& mutation);
  // The cell's bytes were changed in place: it can no longer be recomputed by its record.
  void make_constant(Cell& cell);
  // Before `cell` is written in place while records still read its old value: the old bytes,
  // the record computing them and those readers move to a new cell; `cell` keeps a copy.
  void copy_on_write(Cell& cell);
  // Moves `from`'s buffer, record and dependents to the fresh cell `to` (same size), leaving
  // `from` without buffer or record: the copy-on-write step of an in-place op, which then
  // writes `from`'s new buffer from `to`'s bytes.
  void transfer_identity(Cell& from, Cell& to);

  // The storage handle tensors hold.  All handles of a cell share one count; when the last one
  // dies the deallocation policy decides what happens to the cell.
  std::shared_ptr<Storage> handle(const std::shared_ptr<Cell>& cell);

  // ---- accounting
  std::size_t resident_bytes() const { return resident_bytes_; }
  std::size_t peak_resident_bytes() const { return peak_resident_bytes_; }
  // Starts a new peak measurement from the current resident bytes.
  void reset_peak() { peak_resident_bytes_ = resident_bytes_; }
  // What the resident cells that cannot be evicted now hold, by role (OutOfBudget reports it).
  UnevictableBytes unevictable_bytes() const;
  std::size_t resident_cells() const { return resident_cells_; }
  std::size_t evictable_cells() const { return candidates_.size(); }
  DtrStats stats() const;        // since the last reset_stats()
  DtrStats total_stats() const;  // since the start of the run
  void reset_stats();
  std::uint64_t next_record_id() { return ++record_ids_; }
  // One tick per access, or the compute clock's reading (DtrConfig::compute_clock).
  std::uint64_t tick() { return config_.compute_clock ? clock_ : ++clock_; }
  std::uint64_t now() const { return clock_; }

  // ---- timeline: a sample after every recorded op call (dtr/timeline.h)
  // Starts recording, dropping any samples not yet taken by stop_timeline.  When off, the cost is
  // one branch per call and nothing is allocated.
  void start_timeline();
  // Stops recording and hands over the samples.
  std::vector<TimelineSample> stop_timeline();
  bool timeline_active() const { return timeline_on_; }
  // The samples so far (empty when off).
  const std::vector<TimelineSample>& timeline() const { return timeline_; }

  // ---- trace: JSON lines of every constant, call, mutation, release, pin and annotation
  void start_trace(const std::string& path);
  void stop_trace();
  Trace* trace() const { return trace_.get(); }
  void annotate(std::string_view text);

 private:
  friend class Cell;
  friend struct Heuristics;
  void materialize(Cell& cell, std::string_view op);
  void free_buffer(Cell& cell, CellState next);
  void on_last_handle(Cell& cell);
  // Makes the resident readers of `cell` (through evicted ones no tensor holds) constants, so
  // nothing can replay from it; false, changing nothing, when they hold more bytes than the
  // cell (as many, unless `or_equal`).
  bool freeze_readers(Cell& cell, bool or_equal = false);
  void on_cell_created(Cell& cell);
  void on_cell_destroyed(Cell& cell);
  void make_room(std::size_t bytes, std::string_view op);
  void replay(Record& record, std::string_view op);
  // Evicts victims of one sampled search until `bytes` are freed, and tiny or cheap ones on to
  // `headroom` (see make_room), only those scoring below `below` (a priced swap's score); false
  // when nothing was evicted.
  bool evict_batch(std::size_t bytes, std::size_t headroom,
                   double below = std::numeric_limits<double>::infinity());
  // When the allocator's free bytes could serve a block of `size` but no free block is large
  // enough: evicts the best-scored cell whose block joins free neighbours into one that is
  // (MegEngine's idea against fragmentation); false when there is none.
  bool evict_to_fit(std::size_t size);
  void fill_memory_stats(DtrStats& s) const;
  // DtrConfig::swap: the longest unused value that cannot be evicted (unpinned, held by a tensor
  // or a reader), or null; swap_out moves it to host memory, swap_out_one both (false when there
  // is none), and swap_in brings a swapped value back.
  Cell* swap_victim() const;
  void swap_out(Cell& cell);
  bool swap_out_one();
  // While swapping is on, swappable_ lists the resident cells that are not eviction candidates,
  // so a swap looks at those rather than at every live cell.  Called wherever a cell's state or
  // candidacy changes; rebuild_swappable when swapping is turned on or off.
  void update_swappable(Cell& cell);
  void rebuild_swappable();
  void swap_in(Cell& cell, std::string_view op);
  void free_host(Cell& cell);
  // Between this device's memory and host memory, either way.
  void copy_host(void* dst, const void* src, std::size_t bytes, bool to_host) const;
  // A block from the allocator, evicting while the memory itself is exhausted; OutOfBudget
  // when nothing is left to evict.
  Block allocate_block(std::size_t bytes, std::string_view op);
  static constexpr std::size_t kTinyCell = 4096;
  std::size_t sample_size() const;
  // dtr-eq's union-find classes of evicted cells, which unbudgeted runs do not keep.
  void build_evicted_classes();
  void add_candidate(Cell& cell);
  void remove_candidate(Cell& cell);
  void banish(Cell& cell);
  // Heuristics::evicted_ancestors_cost keeps each cell's last walk up through evicted cells.  The
  // walk from X ends at the first cells that are not evicted with a record, so it changes when a
  // cell on it or at its ends enters or leaves that state or changes its record: each such change
  // calls invalidate_walks, which clears the walks of the cell and of its readers, down through
  // evicted readers.  Rewiring readers (in-place writes), another cost model or heuristic, or
  // a step's end (dtr-next may start or stop predicting) clears every walk (walk_epoch_).
  // dtr-next walks only while it predicts or scores as msps.  Its kept answers about the last
  // step's log (gone costs, next and last reads) change only with the steps' logs and the records:
  // all are cleared (gone_epoch_) at a step's end and where a record is dropped or moved (an
  // in-place write, a banished value).
  bool caches_walks() const {
    return config_.heuristic == Heuristic::Msps ||
           (config_.heuristic == Heuristic::DtrNext && (predicts() || scores_msps()));
  }
  void invalidate_walks(Cell& cell);
  void invalidate_all_walks() {
    ++walk_epoch_;
    walks_kept_ = false;
    forget_gone_costs();
  }
  void forget_gone_costs() { ++gone_epoch_; }
  void add_resident(std::size_t bytes);
  void sub_resident(std::size_t bytes);
  void sample_timeline(const Producer* producer);

  Device device_;
  Allocator& allocator_;
  DtrConfig config_;
  std::size_t resident_bytes_ = 0;
  std::size_t peak_resident_bytes_ = 0;
  std::size_t resident_cells_ = 0;
  std::size_t swapped_bytes_ = 0;
  DtrStats total_;
  DtrStats window_base_;
  std::size_t window_peak_ = 0;
  std::vector<Cell*> candidates_;  // resident, replayable cells: the eviction candidates
  std::vector<Cell*> swappable_;   // resident cells that are not candidates, while swapping
  struct ScoredVictim {
    double score;
    Cell* cell;
  };
  std::vector<ScoredVictim> victim_scratch_;  // evict_batch's kept scores, reused
  struct DrawnVictim {
    Heuristics::NextParts parts;
    Cell* cell;
  };
  struct FloorKey {  // a drawn cell's floor (as ordered bits) and its index in floor_scratch_
    std::uint64_t order;
    std::uint32_t index;
  };
  std::vector<FloorKey> floor_order_scratch_;
  std::vector<DrawnVictim> floor_scratch_;  // evict_batch's drawn cells by score floor
  std::vector<Cell*> sample_scratch_;       // evict_batch's sample, in the order drawn
  // Asks for the cache lines of `c` that scoring it reads (evict_batch, ahead of scoring).
  static void prefetch_for_score(const Cell& c);
  std::vector<Cell*> invalidate_scratch_;  // invalidate_walks's stack, reused
  std::vector<Cell*> needed_scratch_;      // Heuristics::needed_by_evicted's stack, reused
  std::uint64_t walk_epoch_ = 1;
  bool walks_kept_ = false;  // some walk was kept in this epoch: invalidate_walks has work
  std::uint64_t gone_epoch_ = 1;
  std::uint64_t invalidate_stamp_ = 1;
  bool walk_kept_since_invalidate_ = false;      // a new invalidate_stamp_ is due
  bool timing_own_work_ = false;                 // inside a timed search or bookkeeping scope
  std::vector<std::shared_ptr<Cell>> retained_;  // DtrConfig::retain_released
  std::vector<Cell*> cells_;                     // every live cell, for reports
  std::uint64_t cell_ids_ = 0;
  std::uint64_t record_ids_ = 0;
  std::uint64_t clock_ = 0;
  std::uint64_t rng_state_ = 0;
  std::unique_ptr<Trace> trace_;
  bool timeline_on_ = false;
  std::vector<TimelineSample> timeline_;
  DtrStats timeline_base_;  // the counters at start_timeline
  KernelTimes kernel_times_;
  // dtr-next: this step's calls and uses so far, the last step's, the step number that records
  // of this step carry, original calls in this step and in the run (dtr-next's clock), and
  // whether this step has called another op than the last one at some position.
  void note_call(Record& record, std::span<const std::shared_ptr<Cell>> outputs);
  void note_use(Cell& cell);
  void advance_compute_clock(const Record& record);
  bool learns_steps() const { return config_.heuristic == Heuristic::DtrNext; }
  StepLog this_step_, last_step_;
  std::uint64_t step_ = 1;
  std::uint32_t step_calls_ = 0;
  std::uint64_t program_calls_ = 0;
  bool diverged_ = false;
  ScoreChoice score_choice_;
  double step_recompute_cost_ = 0;      // this step's rematerializations, in the cost model's units
  std::uint64_t step_start_draws_ = 0;  // total_.candidates_drawn when this step began
  double step_start_compute_ = 0;       // total_.compute_seconds when this step began
  // dtr-next's trial steps weigh a search by its draws (ScoreChoice's small sample): the
  // marginal search time per drawn cell on the prototype's TreeLSTM log at 0.3 of its peak
  // (2-core AMD EPYC, dtr_sim with --sample 256 against 32: 33 ns), where the cost model is
  // in seconds and the configuration leaves the sample to the pool.  evict_batch prices a
  // search the same way to tell which cells are cheaper to take along than to search for.
  static constexpr double kSecondsPerDraw = 30e-9;
  bool prices_searches() const { return config_.cost == CostModel::Time && config_.sample == 0; }
  // Whether dtr-next scores by the last step now: it has one, this step follows it, and one of
  // the scores that do (its own, the damped and the capped one) is the one chosen.
  bool predicts() const {
    return follows_last_step() && score_choice_.score() != ScoreChoice::Eq &&
           score_choice_.score() != ScoreChoice::Msps;
  }
  // Whether dtr-next scores as msps now: it is the score chosen, and this step follows the last
  // one (where it does not, dtr-next scores as dtr-eq whichever score was chosen).
  bool scores_msps() const {
    return follows_last_step() && score_choice_.score() == ScoreChoice::Msps;
  }
  bool follows_last_step() const { return !diverged_ && !last_step_.empty(); }
  // Whether the chosen one is the damped score, c / (m·√d).
  bool damps() const { return score_choice_.score() == ScoreChoice::Damped; }
  // Whether the chosen one is the capped score, c / (m·min(d, 64)).
  bool caps() const { return score_choice_.score() == ScoreChoice::Capped; }
  // Whether the last step's log has the call that made `record` (made in this step, at a call
  // the last step also made).
  bool logged_last_step(const Record& record) const {
    return record.step == step_ && record.step_call < last_step_.calls();
  }
  void end_step_learning(bool failed);
  std::optional<double> pending_fraction_;  // set_budget_fraction, until resolved
  int steps_until_measured_ = 0;
  std::optional<std::size_t> measured_peak_;
};

}  // namespace remat
