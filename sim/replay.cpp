#include "sim/replay.h"

#include <algorithm>
#include <limits>
#include <memory>

#include "core/allocator.h"
#include "core/segment_allocator.h"
#include "dtr/pool.h"
#include "dtr/trace.h"

namespace remat::sim {
namespace {

// Thrown by a replayed producer once the run's compute passes its limit; never escapes replay().
struct Thrashing {};

struct Account {
  double compute = 0;
  double recompute = 0;
  double limit = std::numeric_limits<double>::infinity();
  std::vector<std::size_t>* lines = nullptr;  // executions in order, when recording

  void add(double cost) {
    compute += cost;
    if (compute > limit) throw Thrashing{};
  }
};

// An op of the recorded run: rematerializing it runs nothing and costs what the input says.
class SimProducer final : public Producer {
 public:
  SimProducer(const Event& event, double cost, Account& account)
      : event_(event), cost_(cost), account_(account) {}
  std::string_view name() const override { return event_.op; }
  void execute(std::span<const KernelArg>, std::span<const KernelArg>) const override {
    account_.recompute += cost_;
    account_.add(cost_);
    if (account_.lines) account_.lines->push_back(event_.line);
  }

 private:
  const Event& event_;
  double cost_;
  Account& account_;
};

// What a dead output's scratch buffer must hold when its record replays (Pool::replay sizes it
// from the output meta): the cell's bytes, rounded up to whole float32 elements.
TensorMeta meta_of(std::size_t bytes) {
  return TensorMeta::contiguous({static_cast<std::int64_t>((bytes + 3) / 4)}, DType::Float32,
                                Device::cpu());
}

// The events that are nodes of the op graph (sim/op_graph.h).
bool runs_as_node(EventKind k) {
  return k == EventKind::Call || k == EventKind::Mutate || k == EventKind::Pin ||
         k == EventKind::Access;
}

class Replayer {
 public:
  Replayer(const Program& program, const ReplayOptions& options)
      : program_(program),
        options_(options),
        allocator_(options.segments ? make_segment_allocator(std::make_unique<HostSegmentSource>(
                                          std::numeric_limits<std::size_t>::max(), false))
                                    : make_accounting_cpu_allocator(
                                          options.prototype.exact_sizes ? 1 : kBufferAlignment)),
        pool_(std::make_unique<Pool>(Device::cpu(), allocator_.get())),
        slot_of_(program.tensors.size()),
        tensor_refs_(program.tensors.size(), 0),
        slots_(program.tensors.size()) {
    for (std::size_t t = 0; t < program.tensors.size(); ++t)
      slot_of_[t] = static_cast<std::uint32_t>(t);
    DtrConfig cfg;
    cfg.budget = options.budget;
    cfg.heuristic = options.heuristic;
    cfg.policy = options.policy;
    cfg.cost = options.cost;
    cfg.seed = options.seed;
    cfg.sample =
        options.prototype.full_scan ? std::numeric_limits<std::size_t>::max() : options.sample;
    cfg.compute_clock = options.prototype.compute_clock;
    cfg.keep_stamp_on_remat = options.prototype.keep_stamp_on_remat;
    cfg.single_victim = options.prototype.single_victim;
    cfg.retain_released = options.prototype.keep_released;
    cfg.stamp_inputs_first = options.prototype.stamp_first;
    cfg.swap = options.swap;
    if (options.swap_priced) cfg.swap_cost_per_byte = options.swap_cost_per_byte;
    pool_->configure(cfg);
    if (options.compute_limit) account_.limit = *options.compute_limit;
  }

  // Takes the calls and uses of another replay's run as this one's last step, and its choice
  // of score (dtr-next).
  void learn_from(Replayer& earlier, const ReplayResult& result) {
    if (result.status == ReplayStatus::Ok)
      earlier.pool_->end_step();
    else
      earlier.pool_->fail_step();
    pool_->set_last_step_log(earlier.pool_->last_step_log());
    pool_->set_score_choice(earlier.pool_->score_choice());
  }
  bool score_settled() const { return pool_->score_choice().settled(); }

  ~Replayer() {
    // Cells die before the pool they report to.
    slots_.clear();
    pool_.reset();
  }

  ReplayResult run() {
    ReplayResult result;
    if (options_.record_schedule) account_.lines = &result.schedule_lines;
    std::size_t resident_peak = 0;
    try {
      for (const Event& e : program_.events) {
        event_ = &e;
        step(e);
        if (options_.swap) charge_swaps();
        if (account_.lines && runs_as_node(e.kind)) account_.lines->push_back(e.line);
        // Held minus resident when the resident bytes reach their peak: what the budget lost to
        // the segments' fragmentation where memory is tightest.
        if (options_.segments && pool_->resident_bytes() >= resident_peak) {
          resident_peak = pool_->resident_bytes();
          result.fragmentation_at_peak_bytes = allocator_->cached_bytes();
        }
      }
      event_ = nullptr;
      if (program_.origin == Origin::PrototypeLog) keep_outputs();
    } catch (const Thrashing&) {
      result.status = ReplayStatus::Thrash;
    } catch (const OutOfBudget& e) {
      result.status = ReplayStatus::Infeasible;
      result.message = e.what();
    } catch (const Error& e) {
      if (!event_)
        REMAT_THROW("{}: making the outputs resident at the end: {}", program_.source, e.what());
      REMAT_THROW("{}:{}: replaying {}: {}", program_.source, event_->line, describe(*event_),
                  e.what());
    }
    account_.lines = nullptr;
    const DtrStats s = pool_->total_stats();
    result.compute = account_.compute;
    result.recompute = account_.recompute;
    result.peak_bytes = s.peak_resident_bytes;
    result.calls = s.calls;
    result.executions = s.executions;
    result.evictions = s.evictions;
    result.rematerializations = s.rematerializations;
    result.metadata_accesses = s.metadata_accesses;
    result.candidates_drawn = s.candidates_drawn;
    result.search_seconds = s.search_seconds;
    result.bookkeeping_seconds = s.bookkeeping_seconds;
    result.fragmentation_evictions = s.fragmentation_evictions;
    result.swap_outs = s.swap_outs;
    result.swap_ins = s.swap_ins;
    result.swap_bytes = s.swap_bytes;
    result.swap_cost = static_cast<double>(s.swap_bytes) * options_.swap_cost_per_byte;
    return result;
  }

 private:
  // The copies of the event just replayed, priced into the run's compute (and its thrash limit).
  void charge_swaps() {
    const std::size_t bytes = pool_->total_stats().swap_bytes;
    if (bytes == swap_bytes_charged_) return;
    account_.add(static_cast<double>(bytes - swap_bytes_charged_) * options_.swap_cost_per_byte);
    swap_bytes_charged_ = bytes;
  }

  // One storage of the run: the handle its tensors share and their references.
  struct Slot {
    std::shared_ptr<Storage> handle;
    long refs = 0;
  };

  std::string describe(const Event& e) const {
    switch (e.kind) {
      case EventKind::Call:
        return "CALL " + e.op;
      case EventKind::Mutate:
        return "MUTATE " + e.op;
      case EventKind::Constant:
        return "CONSTANT";
      case EventKind::Release:
        return "RELEASE";
      case EventKind::Copy:
        return "COPY";
      case EventKind::CopyFrom:
        return "COPY_FROM";
      case EventKind::Pin:
        return "PIN";
      case EventKind::Access:
        return "ACCESS";
      case EventKind::Write:
        return "WRITE";
      case EventKind::Annotate:
        return "ANNOTATE";
    }
    return "the line";
  }

  // The cell a live tensor names.  The parser guarantees liveness; programs built in code are
  // checked here rather than trusted.
  void check_id(std::uint32_t tensor) const {
    REMAT_CHECK(tensor < slot_of_.size(), "tensor id {} out of range ({} tensors)", tensor,
                slot_of_.size());
  }
  Cell& cell(std::uint32_t tensor) {
    check_id(tensor);
    const auto& handle = slots_[slot_of_[tensor]].handle;
    REMAT_CHECK(handle, "tensor {} is used while nothing references it",
                program_.tensors[tensor].name);
    return static_cast<Cell&>(*handle);
  }

  void step(const Event& e) {
    switch (e.kind) {
      case EventKind::Constant: {
        auto c = pool_->new_constant(program_.tensors[e.tensor].bytes);
        bind(e.tensor, pool_->handle(c));
        break;
      }
      case EventKind::Call:
        call(e, e.results, e.aliases);
        break;
      case EventKind::Mutate:
        if (program_.origin == Origin::Trace)
          write_in_place(e);
        else
          mutate_as_new(e);
        break;
      case EventKind::Release:
        release(e.tensor);
        break;
      case EventKind::Copy:
        acquire(e.source);
        break;
      case EventKind::CopyFrom:
        acquire(e.source);  // first, so a storage both share never looks dead in between
        release(e.tensor);
        break;
      case EventKind::Pin:
        cell(e.tensor).freeze();
        break;
      case EventKind::Access:
        cell(e.tensor).resident_data();
        break;
      case EventKind::Write:
        cell(e.tensor).mark_mutated();
        break;
      case EventKind::Annotate:
        if (e.op == Trace::kStepEnd) pool_->end_step();  // dtr-next learns the step just ended
        break;
    }
  }

  // The dispatch path of an op call (ops/dispatch.cpp): pin the inputs in order, allocate each
  // output, record the call, hand out the outputs' handles, unpin.
  void call(const Event& e, const std::vector<std::uint32_t>& results,
            const std::vector<std::int32_t>& aliases) {
    REMAT_CHECK(aliases.empty() || aliases.size() == results.size(),
                "{} results but {} ALIAS entries", results.size(), aliases.size());
    for (std::size_t i = 0; i < results.size(); ++i) {
      check_id(results[i]);
      REMAT_CHECK(aliases.empty() || aliases[i] < static_cast<std::int32_t>(e.args.size()),
                  "result {} aliases argument {} of {}", i, aliases[i], e.args.size());
    }
    std::vector<Cell*> pinned;
    pinned.reserve(e.args.size());
    for (std::uint32_t a : e.args) {
      Cell& c = cell(a);
      pool_->pin(c, e.op);
      pinned.push_back(&c);
    }
    std::vector<std::shared_ptr<Cell>> outs;
    outs.reserve(results.size());
    for (std::size_t i = 0; i < results.size(); ++i)
      if (aliases.empty() || aliases[i] < 0)
        outs.push_back(pool_->new_output(program_.tensors[results[i]].bytes, e.op));
    const double cost = event_cost(e, options_.cost);
    auto record = std::make_shared<Record>();
    record->producer = std::make_shared<SimProducer>(e, cost, account_);
    record->id = pool_->next_record_id();
    record->seconds = e.seconds;
    // The time cost the heuristics score is the recorded one, never what the pool's kernel-time
    // table would make of the replay's empty kernels (it only fills a time_cost of 0; a zero
    // cost is kept as the smallest positive double).
    record->time_cost = std::max(e.time_cost > 0 ? e.time_cost : e.seconds,
                                 std::numeric_limits<double>::denorm_min());
    record->flops = e.flops;
    record->bytes = e.bytes;
    record->inputs.reserve(pinned.size());
    for (Cell* c : pinned) record->inputs.push_back(c->shared_from_this());
    record->input_metas.resize(pinned.size());
    for (const auto& c : outs) {
      record->outputs.push_back(c);
      record->output_metas.push_back(meta_of(c->nbytes()));
    }
    pool_->record_call(record, outs);
    account_.add(cost);
    std::size_t next_out = 0;
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (aliases.empty() || aliases[i] < 0) {
        bind(results[i], pool_->handle(outs[next_out++]));
      } else {  // a view: the input's storage gains a reference
        slot_of_[results[i]] = slot_of_[e.args[aliases[i]]];
        tensor_refs_[results[i]] = 1;
        ++slots_[slot_of_[results[i]]].refs;
      }
    }
    for (Cell* c : pinned) pool_->unpin(*c);
  }

  // A framework trace's in-place op (call_inplace): pin the other arguments, begin_write on
  // argument 0 along the recorded path, finish_write; the cell keeps its handle and references.
  void write_in_place(const Event& e) {
    std::vector<Cell*> pinned;
    for (std::size_t i = 1; i < e.args.size(); ++i) {
      Cell& c = cell(e.args[i]);
      pool_->pin(c, e.op);
      pinned.push_back(&c);
    }
    Cell& target = cell(e.args[0]);
    std::shared_ptr<Cell> old = pool_->begin_write(target, e.overwrite, e.op);
    if (old) pinned.push_back(old.get());
    Record mutation;
    mutation.producer = std::make_shared<SimProducer>(e, 0, account_);
    mutation.seconds = e.seconds;
    mutation.inputs.reserve(e.args.size());
    for (std::uint32_t a : e.args) mutation.inputs.push_back(cell(a).shared_from_this());
    pool_->finish_write(target, mutation);
    account_.add(event_cost(e, options_.cost));
    const std::uint32_t now = e.mutated_results.at(0), before = e.args[0];
    slot_of_[now] = slot_of_[before];
    tensor_refs_[now] = tensor_refs_[before];
    tensor_refs_[before] = 0;
    for (Cell* c : pinned) pool_->unpin(*c);
  }

  // A prototype log's in-place op: a call whose results are new tensors of the mutated
  // arguments' storage sizes; each old tensor then loses the reference its name held.
  void mutate_as_new(const Event& e) {
    call(e, e.mutated_results, {});
    for (std::uint32_t k : e.mutated) release(e.args[k]);
  }

  void bind(std::uint32_t tensor, std::shared_ptr<Storage> handle) {
    check_id(tensor);
    Slot& s = slots_[slot_of_[tensor]];
    s.handle = std::move(handle);
    s.refs = 1;
    tensor_refs_[tensor] = 1;
  }

  void acquire(std::uint32_t tensor) {
    check_id(tensor);
    ++tensor_refs_[tensor];
    ++slots_[slot_of_[tensor]].refs;
  }

  // The last reference to a storage drops its handle: the pool's deallocation policy runs.
  void release(std::uint32_t tensor) {
    check_id(tensor);
    Slot& s = slots_[slot_of_[tensor]];
    REMAT_CHECK(s.refs > 0, "tensor {} is released more often than it is referenced",
                program_.tensors[tensor].name);
    --tensor_refs_[tensor];
    if (--s.refs == 0) s.handle.reset();
  }

  // The prototype's logs: tensors still referenced at the end are outputs, resident together.
  void keep_outputs() {
    std::vector<Cell*> pinned;
    for (std::size_t t = 0; t < tensor_refs_.size(); ++t) {
      if (tensor_refs_[t] <= 0) continue;
      Cell& c = cell(static_cast<std::uint32_t>(t));
      pool_->pin(c, "output");
      pinned.push_back(&c);
    }
    for (Cell* c : pinned) pool_->unpin(*c);
  }

  const Program& program_;
  const ReplayOptions& options_;
  Account account_;
  std::size_t swap_bytes_charged_ = 0;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Pool> pool_;
  std::vector<std::uint32_t> slot_of_;  // tensor -> the slot of its storage (views share one)
  std::vector<long> tensor_refs_;
  std::vector<Slot> slots_;
  const Event* event_ = nullptr;
};

}  // namespace

std::string_view status_name(ReplayStatus s) {
  switch (s) {
    case ReplayStatus::Ok:
      return "ok";
    case ReplayStatus::Thrash:
      return "thrash";
    case ReplayStatus::Infeasible:
      return "infeasible";
  }
  return "?";
}

ReplayResult replay(const Program& program, const ReplayOptions& options) {
  // A trace that marks its steps' ends teaches dtr-next step by step, as the run did.
  if (options.heuristic != Heuristic::DtrNext || marks_steps(program))
    return Replayer(program, options).run();
  // Otherwise dtr-next learns from the last step: the program itself plays it, as the step
  // before the measured one of a training run whose steps repeat.
  return replay_after(program, program, options);
}

bool marks_steps(const Program& program) {
  return std::any_of(program.events.begin(), program.events.end(), [](const Event& e) {
    return e.kind == EventKind::Annotate && e.op == Trace::kStepEnd;
  });
}

ReplayResult replay_after(const Program& previous, const Program& program,
                          const ReplayOptions& options) {
  ReplayOptions learn = options;
  learn.heuristic = Heuristic::DtrNext;  // records the calls and uses
  learn.budget.reset();
  learn.compute_limit.reset();
  auto earlier = std::make_unique<Replayer>(previous, learn);
  ReplayResult result = earlier->run();
  // A step that repeats: budgeted, a trial step for each option dtr-next chooses between
  // (dtr/score_choice.h), as the first budgeted steps of a training run would be; then the
  // measured step.  Each step learns from the one before it once.
  auto after_earlier = [&] {
    auto next = std::make_unique<Replayer>(program, options);
    next->learn_from(*earlier, result);
    return next;
  };
  std::unique_ptr<Replayer> step = after_earlier();
  const bool repeats = &previous == &program;
  for (std::size_t trials = 0;
       repeats && options.budget && trials < ScoreChoice::kOptions && !step->score_settled();
       ++trials) {
    result = step->run();
    earlier = std::move(step);
    step = after_earlier();
  }
  return step->run();
}

}  // namespace remat::sim
