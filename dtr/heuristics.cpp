#include "dtr/heuristics.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/recycling_allocator.h"
#include "dtr/pool.h"

namespace remat {
namespace {

std::shared_ptr<EvictedClass> find(const std::shared_ptr<EvictedClass>& start) {
  if (!start->parent) return start;  // most classes: a cell evicted alone
  auto c = start;
  auto root = c;
  while (root->parent) root = root->parent;
  while (c->parent && c->parent != root) {  // path compression
    auto next = c->parent;
    c->parent = root;
    c = next;
  }
  return root;
}

// The root without path compression or reference counting: scoring only reads the classes.
const EvictedClass* root_of(const EvictedClass* c) {
  while (c->parent) c = c->parent.get();
  return c;
}

bool evicted_with_record(const Cell& c) {
  return !c.resident() && c.state() == CellState::Evicted && c.record();
}

// Calls f on every neighbour: inputs of the cell's record and live dependents.
template <class F>
void for_each_neighbour(Cell& cell, F&& f) {
  if (const auto& r = cell.record())
    for (const auto& in : r->inputs) f(*in);
  for (const auto& w : cell.dependents())
    if (Cell* d = w.get()) f(*d);
}

std::uint64_t next_stamp() {
  static std::uint64_t stamp = 0;
  return ++stamp;
}

}  // namespace

// Directed closure of evicted cells: up through evicted inputs (needed to recompute the cell),
// and down through evicted dependents (which need the cell to be recomputed).  Iterative.
void Heuristics::evicted_closure(Cell& start, CostModel model, bool ancestors, bool descendants,
                                 NeighbourhoodWalk& w) {
  // (cell, walking up); reused: a search walks hundreds of candidates.
  thread_local std::vector<std::pair<Cell*, bool>> stack;
  stack.clear();
  auto visit = [&](Cell& c, bool up) {
    ++w.accesses;
    if (!evicted_with_record(c) || c.mark_ == w.stamp) return;
    c.mark_ = w.stamp;
    w.cost += c.record()->cost(model);
    ++w.count;
    stack.push_back({&c, up});
  };
  if (ancestors && start.record())
    for (const auto& in : start.record()->inputs) visit(*in, true);
  if (descendants)
    for (const auto& wd : start.dependents())
      if (Cell* d = wd.get()) visit(*d, false);
  while (!stack.empty() && !w.over()) {
    auto [c, up] = stack.back();
    stack.pop_back();
    if (up) {
      for (const auto& in : c->record()->inputs) visit(*in, true);
    } else {
      for (const auto& wd : c->dependents())
        if (Cell* d = wd.get()) visit(*d, false);
    }
  }
}

double Heuristics::evicted_ancestors_cost(Pool& pool, Cell& cell, double max_cost) {
  constexpr double kOver = std::numeric_limits<double>::infinity();
  ++pool.total_.metadata_accesses;
  const bool kept = pool.caches_walks();  // else nothing clears a kept walk: walk afresh
  if (kept && cell.walk_epoch_ == pool.walk_epoch_) {
    // The same sum, in the same order, that walking again would give; an unfinished walk's
    // sum is a lower bound, enough to say the cell cannot beat this bound either.
    if (cell.walk_cost_ > max_cost) return kOver;
    if (cell.walk_complete_) return cell.walk_cost_;
  }
  NeighbourhoodWalk w{next_stamp()};
  cell.mark_ = w.stamp;
  w.max_cost = max_cost;
  evicted_closure(cell, pool.config_.cost, true, false, w);
  pool.total_.metadata_accesses += w.accesses;
  if (kept) {
    cell.walk_cost_ = w.cost;
    cell.walk_complete_ = !w.over();
    cell.walk_epoch_ = pool.walk_epoch_;
    pool.walks_kept_ = true;
    pool.walk_kept_since_invalidate_ = true;
  }
  return w.over() ? kOver : w.cost;
}

// dtr-eq's cost: the cell's own plus the costs of the distinct evicted classes around it.
double Heuristics::eq_cost(Pool& pool, Cell& cell, double c0) {
  double cost = c0;
  const EvictedClass* seen[16];
  std::size_t n_seen = 0;
  std::vector<const EvictedClass*> more;
  for_each_neighbour(cell, [&](Cell& nb) {
    ++pool.total_.metadata_accesses;
    if (!nb.evicted_class_) return;
    const EvictedClass* root = root_of(nb.evicted_class_.get());
    for (std::size_t i = 0; i < n_seen; ++i)
      if (seen[i] == root) return;
    if (std::find(more.begin(), more.end(), root) != more.end()) return;
    if (n_seen < 16)
      seen[n_seen++] = root;
    else
      more.push_back(root);
    cost += root->cost;
  });
  return cost;
}

// The ancestors of `r` made in this step that the last step no longer read at or after call
// `at`: by then they are likely gone (released and freed), and rebuilding r's output would
// rebuild them too.  Their cost, each counted once (marked with the walk's `stamp`: a list of
// those seen, searched per input, was a third of this walk on the Unrolled GAN's log), visiting
// at most `visits` records; past that, the cost of those visited, a lower bound (a long chain
// of them, such as a whole forward pass behind the logits read after backward).  Infinity there
// instead left the Unrolled GAN log at 0.3 of its peak no victim but such cells (OutOfBudget), and
// counting an ancestor once per path thrashed it.
double Heuristics::gone_ancestors_cost(const Pool& pool, const Record& r, std::uint32_t at,
                                       CostModel model, int& visits, std::uint64_t stamp) {
  if (r.logged_inputs_epoch != pool.gone_epoch_) {
    r.logged_inputs.clear();
    for (const auto& in : r.inputs) {
      const Record* ir = in->record().get();
      if (!ir || !in->replayable() || !pool.logged_last_step(*ir))
        continue;  // a constant, or made in an earlier step: still there
      // The last read is kept per cell too: inputs are shared, and a lookup in the log's read
      // lists costs a cache miss or two.
      if (in->last_read_epoch_ != pool.gone_epoch_) {
        in->last_read_ =
            pool.last_step_.last_use(ir->step_call, in->output_index()).value_or(Cell::kNoNextUse);
        in->last_read_epoch_ = pool.gone_epoch_;
      }
      r.logged_inputs.push_back({ir, in->last_read_});
    }
    r.logged_inputs_epoch = pool.gone_epoch_;
  }
  double cost = 0;
  for (const Record::LoggedInput& in : r.logged_inputs) {
    // Read again at or after `at`: still there.
    if (in.last_read != Cell::kNoNextUse && in.last_read >= at) continue;
    const Record* ir = in.record;
    if (ir->gone_visit == stamp) continue;
    if (visits <= 0) return cost;
    --visits;
    ir->gone_visit = stamp;
    cost += ir->cost(model) + gone_ancestors_cost(pool, *ir, at, model, visits, stamp);
  }
  return cost;
}

// dtr-next's time term, in place of staleness: the distance, in op calls, to the cell's next
// use as the last step predicts it (Belady's rule: the latest next use is evicted first).
// Without a last step, or once this step has diverged from it, exactly dtr-eq's staleness.  A
// cell the last step did not read again may still be needed to rematerialize its readers, so
// it keeps its staleness, on the same clock (op calls); so does a cell made in an earlier step.
// Treating such cells as never needed (evicting them first) cost ResNet-20 2.4x the
// recomputation of dtr-eq at half its peak, and it cost the Unrolled GAN log in dtr_sim.
// Belady's rule assumes a value costs the same to rebuild whenever it is needed; it does not
// when its inputs are gone by its next use (ResNet-20's logits, read for the accuracy after
// backward, would rebuild the whole forward).  The cost of the ancestors it would rebuild is
// added to its own (`gone_cost`), and when they cost more than the cell, it keeps its
// staleness (switching on any gone input instead cost an MLP's step 1.45 against 1.29 in
// dtr_sim, its ReLU outputs' inputs being gone by backward but cheap): measured on
// ResNet-20 in the runtime at half its peak (flops cost), 21 rematerializations a step instead of
// 36 (dtr-eq: 25).
[[gnu::always_inline]] inline double Heuristics::read_distance(const Pool& pool, std::uint32_t at) {
  return static_cast<double>(at - static_cast<std::uint32_t>(pool.step_calls_) + 1);
}

[[gnu::always_inline]] inline double Heuristics::calls_stale(const Pool& pool, const Cell& cell) {
  // A cell without a predicted read of its own is needed, if at all, to rebuild others: its
  // staleness in calls counts double against predicted distances (on the prototype's logs at
  // 0.3 and 0.5 where dtr-eq runs, dtr-next's overhead against dtr-eq's, geometric mean: x1
  // 0.816, x2 0.804; x3 a little lower, x4 thrashed the Unrolled GAN at 0.3).
  constexpr double kUnpredictedWeight = 2;
  return kUnpredictedWeight * static_cast<double>(pool.program_calls_ - cell.last_call_ + 1);
}

[[gnu::always_inline]] inline std::uint32_t Heuristics::next_read(Pool& pool, const Cell& cell) {
  const std::uint32_t now = static_cast<std::uint32_t>(pool.step_calls_);
  // Reads are sorted, so the read found from an earlier call is the answer until it is passed
  // (the log lookup, a cache miss or two per drawn cell, was most of next_use's time).
  if (cell.next_epoch_ != pool.gone_epoch_ || now < cell.next_from_ || now > cell.next_at_) {
    std::optional<std::uint32_t> next;
    if (const Record* r = cell.record().get())  // a constant is never predicted
      if (pool.logged_last_step(*r))
        next = pool.last_step_.next_use(r->step_call, cell.output_index(), now);
    cell.next_epoch_ = pool.gone_epoch_;
    cell.next_from_ = now;
    cell.next_at_ = next ? *next : Cell::kNoNextUse;
  }
  return cell.next_at_;
}

[[gnu::always_inline]] inline Heuristics::NextUse Heuristics::use_at(Pool& pool, const Cell& cell,
                                                                     double c0, std::uint32_t at) {
  if (at == Cell::kNoNextUse) return {calls_stale(pool, cell)};
  NextUse out{read_distance(pool, at)};
  out.gone_cost = gone_cost(pool, cell, at);
  // Gone ancestors that cost more than the cell itself: its rebuild at the next use would cost
  // more than twice what Belady's rule assumes, so the distance is no guide.
  if (out.gone_cost > c0) out.distance = calls_stale(pool, cell);
  return out;
}

Heuristics::NextUse Heuristics::next_use(Pool& pool, const Cell& cell, double c0,
                                         double staleness) {
  if (!pool.predicts()) return {staleness};
  return use_at(pool, cell, c0, next_read(pool, cell));
}

[[gnu::always_inline]] inline double Heuristics::kept_walk(const Pool& pool, const Cell& cell) {
  return pool.caches_walks() && cell.walk_epoch_ == pool.walk_epoch_ ? cell.walk_cost_ : 0;
}

// Evictions change nothing gone_ancestors_cost reads, so a cell asks again only once its next
// use moved (or a step ended, or a record was dropped: Pool::gone_epoch_).
double Heuristics::gone_cost(Pool& pool, const Cell& cell, std::uint32_t at) {
  ++pool.total_.metadata_accesses;
  if (cell.gone_epoch_ == pool.gone_epoch_ && cell.gone_at_ == at) return cell.gone_cost_;
  constexpr int kMaxVisits = 64;
  int visits = kMaxVisits;
  cell.gone_cost_ =
      gone_ancestors_cost(pool, *cell.record(), at, pool.config_.cost, visits, next_stamp());
  pool.total_.metadata_accesses += static_cast<std::uint64_t>(kMaxVisits - visits);
  cell.gone_epoch_ = pool.gone_epoch_;
  cell.gone_at_ = at;
  return cell.gone_cost_;
}

double Heuristics::needed_by_evicted(Pool& pool, Cell& cell, double distance) {
  constexpr int kMaxVisits = 32;  // neighbours looked at (8 to 64 measured alike; all: worse)
  const std::uint64_t stamp = next_stamp();
  cell.mark_ = stamp;
  std::vector<Cell*>& stack = pool.needed_scratch_;
  stack.clear();
  auto push_dependents = [&](Cell& c) {
    for (const auto& w : c.dependents())
      if (Cell* d = w.get()) stack.push_back(d);
  };
  push_dependents(cell);
  for (int visits = 0; !stack.empty() && visits < kMaxVisits; ++visits) {
    Cell& d = *stack.back();
    stack.pop_back();
    ++pool.total_.metadata_accesses;
    if (d.mark_ == stamp || !evicted_with_record(d)) continue;
    d.mark_ = stamp;
    distance = std::min(distance, next_use(pool, d, d.record()->cost(pool.config_.cost),
                                           std::numeric_limits<double>::infinity())
                                      .distance);
    push_dependents(d);
  }
  return distance;
}

// dtr-next with a last step to learn from: Belady's rule for values that are rebuilt, not
// reloaded.  The time term is the distance to the first moment the cell is needed: its own
// predicted read, or the predicted read of an evicted value rebuilt from it (evicting it then
// lengthens that rebuild).  The cost term is what rebuilding it at that moment costs: its own
// cost, its evicted ancestors' (walked exactly, as msps does) and the gone ancestors'
// (next_use).  On the prototype's logs at 0.3 and 0.5 of the peak, where dtr-eq runs: 0.80x
// dtr-eq's overhead (geometric mean), against 0.92x with dtr-eq's neighbourhood cost over the
// cell's own next read (README, "dtr-next").
// The floor leaves out needed_by_evicted too (it can only shorten the distance): the drawn
// cells that are never scored skip its walk of evicted dependents.
// The damped score counts distances past kFull calls by their square root: among values needed
// late, cost matters more than exactly how late.  Nearer ones count in full, as in Belady's
// rule.  Damped from the first call (c / (m·√d)), its trial evicted values needed within a few
// calls on a trace of ResNet-20's steps at 0.25 and 0.3 of the peak (flops cost), and their
// rebuilds pinned two thirds of the budget: OutOfBudget until rebuilds could let go of the pins
// below them (Pool::ensure_resident), and with that still 1.0276 against 1.0265 at 0.3.  As a
// third trial score on the prototype's logs at 0.2 to 0.7 (geometric mean overhead, 39 cells)
// kFull = 16 gave 0.1158, 32 0.1143, 64 0.1140, 128 0.1176 (with √ from the first call: 0.1148).
// The capped score counts no distance past kFull calls: past them, cost per byte alone picks
// the victim.  As a fourth trial score on the prototype's logs at 0.2 to 0.7 (53 cells where
// every one of 5 seeds ran; dtr-next's mean overhead against the three scores' alone,
// geometric mean): a cap at 1 call 0.982, 16 0.971, 64 0.963, 256 0.975.
[[gnu::always_inline]] inline double Heuristics::time_term(const Pool& pool, double distance) {
  constexpr double kFull = 64;
  if (pool.caps()) return std::min(distance, kFull);
  if (!pool.damps() || distance <= kFull) return distance;
  return kFull * std::sqrt(distance / kFull);
}

// use_at's answer for a next read at call `at`, and the floor with it.
[[gnu::always_inline]] inline void Heuristics::settle_parts(Pool& pool, const Cell& cell,
                                                            const Basics& b, std::uint32_t at,
                                                            NextParts& parts) {
  const NextUse next = use_at(pool, cell, b.c0, at);
  parts.distance = next.distance;
  parts.gone_cost = next.gone_cost;
  parts.floor = (b.c0 + parts.walked + parts.gone_cost) / (b.m * time_term(pool, parts.distance));
  parts.exact = true;
}

// The floor counts a kept walk of evicted ancestors (a lower bound on their cost, in the
// score's order of sums): on the LSTM and TreeLSTM logs the walks put most drawn cells' scores
// far above their floors, and without it a search scored some 100 of the 256 drawn exactly.
Heuristics::NextParts Heuristics::next_parts(Pool& pool, Cell& cell, const Basics& b) {
  NextParts parts;
  parts.walked = kept_walk(pool, cell);
  settle_parts(pool, cell, b, next_read(pool, cell), parts);
  return parts;
}

double Heuristics::next_score(Pool& pool, Cell& cell, const Basics& b, const NextParts& parts,
                              double bound) {
  constexpr double kOver = std::numeric_limits<double>::infinity();
  // The most the evicted ancestors may cost for the cell to score within the bound.
  auto most = [&](double distance) {
    return bound < kOver ? (bound + 1e-9 * std::abs(bound)) * b.m * time_term(pool, distance) -
                               b.c0 - parts.gone_cost
                         : kOver;
  };
  // A kept walk's sum (a lower bound on the ancestors' cost) with the cell's own predicted
  // distance, which needed_by_evicted can only shorten: a cell past the bound with these is
  // past it with the real ones, so its walk of evicted dependents is skipped (the same answer;
  // on the LSTM log at 0.3 that walk was a third of the search).
  if (bound < kOver && pool.caches_walks() && cell.walk_epoch_ == pool.walk_epoch_) {
    ++pool.total_.metadata_accesses;
    if (cell.walk_cost_ > most(parts.distance)) return kOver;
  }
  const double distance = needed_by_evicted(pool, cell, parts.distance);
  const double max_cost = most(distance);
  if (max_cost < 0) return kOver;  // past it unwalked
  // Infinity past max_cost: the cell cannot beat the best.
  const double ancestors = evicted_ancestors_cost(pool, cell, max_cost);
  return (b.c0 + ancestors + parts.gone_cost) / (b.m * time_term(pool, distance));
}

// Only a few dozen of the 256 drawn cells are scored, and the floor order stops before the
// rest; the gone-ancestor walk, redone for every drawn cell after each in-place write (which
// drops the kept answers), was a quarter of the Unrolled GAN's search at 0.3 of its peak.
Heuristics::NextParts Heuristics::next_parts(Pool& pool, Cell& cell) {
  if (pool.config_.heuristic != Heuristic::DtrNext || !pool.predicts()) return {};
  const Basics b = basics(pool, cell);
  NextParts parts;
  parts.walked = kept_walk(pool, cell);
  const std::uint32_t at = next_read(pool, cell);
  if (at == Cell::kNoNextUse || (cell.gone_epoch_ == pool.gone_epoch_ && cell.gone_at_ == at)) {
    settle_parts(pool, cell, b, at, parts);  // nothing left to walk
    return parts;
  }
  parts.exact = false;
  // The least the floor can be: gone ancestors costing nothing, or just over the cell's own
  // cost (past it the distance is the staleness; summed in the floor's order, so that rounding
  // keeps this below it).
  const double near = (b.c0 + parts.walked) / (b.m * time_term(pool, read_distance(pool, at)));
  const double far =
      (b.c0 + parts.walked + b.c0) / (b.m * time_term(pool, calls_stale(pool, cell)));
  parts.floor = std::min(near, far);
  return parts;
}

void Heuristics::complete_parts(Pool& pool, Cell& cell, NextParts& parts) {
  if (!parts.exact) settle_parts(pool, cell, basics(pool, cell), next_read(pool, cell), parts);
}

double Heuristics::score(Pool& pool, Cell& cell, const NextParts& parts, double bound) {
  ++pool.total_.metadata_accesses;
  if (stamped_now(pool, cell)) return std::numeric_limits<double>::infinity();
  return next_score(pool, cell, basics(pool, cell), parts, bound);
}

Heuristics::Basics Heuristics::basics(const Pool& pool, const Cell& cell) {
  return {static_cast<double>(std::max<std::uint64_t>(1, pool.now() - cell.last_access())),
          static_cast<double>(std::max<std::size_t>(1, cell.nbytes())),
          cell.record()->cost(pool.config_.cost)};
}

bool Heuristics::stamped_now(const Pool& pool, const Cell& cell) {
  const Heuristic h = pool.config_.heuristic;
  return pool.config_.compute_clock && pool.now() == cell.last_access() &&
         h != Heuristic::Largest && h != Heuristic::Msps && h != Heuristic::Random;
}

double Heuristics::score(Pool& pool, Cell& cell, double bound) {
  const DtrConfig& cfg = pool.config_;
  const Basics b = basics(pool, cell);
  const double s = b.s, m = b.m, c0 = b.c0;
  ++pool.total_.metadata_accesses;
  if (stamped_now(pool, cell)) return std::numeric_limits<double>::infinity();
  switch (cfg.heuristic) {
    case Heuristic::Lru:
      return 1.0 / s;
    case Heuristic::Largest:
      return 1.0 / m;
    case Heuristic::DtrLocal:
      return c0 / (m * s);
    case Heuristic::Random:
      return random_score(pool);
    case Heuristic::Msps:
      return msps_score(pool, cell, b, bound);
    case Heuristic::Dtr:
    case Heuristic::EStar: {
      NeighbourhoodWalk w{next_stamp()};
      cell.mark_ = w.stamp;
      if (bound < std::numeric_limits<double>::infinity()) {
        const double slack = 1e-9 * std::abs(bound);  // as msps's
        if (cfg.heuristic == Heuristic::Dtr) w.max_cost = (bound + slack) * m * s - c0;
        if (cfg.heuristic == Heuristic::EStar) w.max_count = bound + slack - 0.5 / s;
      }
      evicted_closure(cell, cfg.cost, true, true, w);
      pool.total_.metadata_accesses += w.accesses;
      if (w.over()) return std::numeric_limits<double>::infinity();  // cannot beat the best
      if (cfg.heuristic == Heuristic::Dtr) return (c0 + w.cost) / (m * s);
      // |e*|, ties broken towards the stalest cell.
      return static_cast<double>(w.count) + 0.5 / s;
    }
    case Heuristic::DtrEq:
      return eq_score(pool, cell, b, bound);
    case Heuristic::DtrNext:
      // msps's score did better in the trial steps (dtr/score_choice.h): exactly msps.
      if (pool.scores_msps()) return msps_score(pool, cell, b, bound);
      // Nothing learned yet, this step left the last one's path, or dtr-eq's score did better
      // in the trial steps: exactly dtr-eq.
      if (!pool.predicts()) return eq_score(pool, cell, b, bound);
      return next_score(pool, cell, b, next_parts(pool, cell, b), bound);
  }
  return 0;
}

// The evicted neighbours' classes only add to the cell's own cost: a cell past the bound on
// its own cost is past it, its classes not looked up (on the LSTM log at half its peak, those
// lookups for every drawn cell were most of dtr-eq's search).
double Heuristics::eq_score(Pool& pool, Cell& cell, const Basics& b, double bound) {
  if (bound < std::numeric_limits<double>::infinity() &&
      b.c0 / (b.m * b.s) > bound + 1e-9 * std::abs(bound))
    return std::numeric_limits<double>::infinity();
  return eq_cost(pool, cell, b.c0) / (b.m * b.s);
}

double Heuristics::msps_score(Pool& pool, Cell& cell, const Basics& b, double bound) {
  double max_cost = std::numeric_limits<double>::infinity();
  // With a relative margin, so rounding never stops a walk whose score would tie the bound
  // (ties go to the lower cell id, and msps scores tie often).
  if (bound < std::numeric_limits<double>::infinity())
    max_cost = (bound + 1e-9 * std::abs(bound)) * b.m - b.c0;
  return (b.c0 + evicted_ancestors_cost(pool, cell, max_cost)) / b.m;
}

double Heuristics::random_score(Pool& pool) {
  pool.rng_state_ ^= pool.rng_state_ << 13, pool.rng_state_ ^= pool.rng_state_ >> 7,
      pool.rng_state_ ^= pool.rng_state_ << 17;
  return static_cast<double>(pool.rng_state_ >> 11);
}

double Heuristics::swap_score(Pool& pool, const Cell& cell, double copy_cost) {
  const double s = static_cast<double>(std::max<std::uint64_t>(1, pool.now() - cell.last_access()));
  const double m = static_cast<double>(std::max<std::size_t>(1, cell.nbytes()));
  switch (pool.config_.heuristic) {
    case Heuristic::Lru:
      return 1.0 / s;
    case Heuristic::Largest:
      return 1.0 / m;
    case Heuristic::Random:
      return random_score(pool);
    case Heuristic::Msps:
      return copy_cost / m;
    case Heuristic::EStar:
      return 0.5 / s;  // |e*| = 0
    case Heuristic::DtrNext:
      if (pool.scores_msps()) return copy_cost / m;
      // Never recomputed, so never predicted: the staleness next_use gives such a cell.
      if (pool.predicts())
        return copy_cost / (m * time_term(pool, next_use(pool, cell, copy_cost, s).distance));
      return copy_cost / (m * s);
    case Heuristic::Dtr:
    case Heuristic::DtrEq:
    case Heuristic::DtrLocal:
      return copy_cost / (m * s);
  }
  return 0;
}

std::uint64_t Heuristics::new_stamp() {
  return next_stamp();
}

void Heuristics::mark_neighbours(Cell& cell, std::uint64_t stamp) {
  for_each_neighbour(cell, [&](Cell& nb) { nb.mark_ = stamp; });
}

void Heuristics::on_evicted(Pool& pool, Cell& cell) {
  // From the thread's free list: one per eviction (our TreeLSTM's trace, 20,000 in 6 steps),
  // and a heap allocation each was a third of this update.
  auto cls = std::allocate_shared<EvictedClass>(RecyclingAllocator<EvictedClass>());
  cls->cost = cell.record()->cost(pool.config_.cost);
  cls->size = 1;
  cell.evicted_class_ = cls;
  for_each_neighbour(cell, [&](Cell& nb) {
    if (!nb.evicted_class_ || &nb == &cell) return;
    auto a = find(cell.evicted_class_), b = find(nb.evicted_class_);
    if (a == b) return;
    if (a->size < b->size) std::swap(a, b);  // union by size
    b->parent = a;
    a->cost += b->cost;
    a->size += b->size;
  });
}

void Heuristics::on_rematerialized(Pool& pool, Cell& cell) {
  if (!cell.evicted_class_) return;
  auto root = find(cell.evicted_class_);
  root->cost = std::max(0.0, root->cost - cell.record()->cost(pool.config_.cost));
  if (root->size > 0) --root->size;
  cell.evicted_class_.reset();
}

}  // namespace remat
