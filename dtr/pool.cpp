#include "dtr/pool.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "core/cuda.h"
#include "core/error.h"
#include "core/recycling_allocator.h"
#include "core/release.h"
#include "dtr/fast_mod.h"
#include "dtr/heuristics.h"
#include "dtr/tick_clock.h"
#include "dtr/trace.h"

namespace remat {
namespace {

__extension__ using UInt128 = unsigned __int128;  // GCC and Clang

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Adds the elapsed time of its scope to a counter.
struct Timer {
  double& sink;
  Clock::time_point t0 = Clock::now();
  ~Timer() { sink += seconds_since(t0); }
};

// The pool's own work (search, bookkeeping), timed once: a scope inside another timed scope
// (an eviction's invalidation inside a search) counts toward the outer one only.
class OwnWorkTimer {
 public:
  OwnWorkTimer(double& sink, bool& timing) : sink_(sink), timing_(timing), outer_(!timing) {
    if (outer_) timing_ = true, t0_ = TickClock::now();
  }
  ~OwnWorkTimer() {
    if (outer_) sink_ += TickClock::seconds_since(t0_), timing_ = false;
  }
  OwnWorkTimer(const OwnWorkTimer&) = delete;
  OwnWorkTimer& operator=(const OwnWorkTimer&) = delete;

 private:
  double& sink_;
  bool& timing_;
  const bool outer_;
  std::uint64_t t0_ = 0;
};

}  // namespace

Pool& Pool::of(Device device) {
  // Called on every op: the CPU pool is found without a lock or a lookup.
  if (device == Device::cpu()) {
    static Pool* const cpu = new Pool(Device::cpu());
    return *cpu;
  }
  // One pool per CUDA device, found by index: an atomic load per op once it exists.  Pools live
  // for the whole process: cells may die during static destruction.
  constexpr int kMaxDevices = 64;
  REMAT_CHECK(device.is_cuda() && device.index >= 0 && device.index < kMaxDevices,
              "no pool for device {} (CUDA device indices run from 0 to {})", device,
              kMaxDevices - 1);
  static std::atomic<Pool*> pools[kMaxDevices];
  if (Pool* p = pools[device.index].load(std::memory_order_acquire)) return *p;
  static std::mutex mu;
  std::lock_guard lock(mu);
  Pool* p = pools[device.index].load(std::memory_order_relaxed);
  if (!p) {
    p = new Pool(device);  // allocator_for checks that the device exists
    pools[device.index].store(p, std::memory_order_release);
  }
  return *p;
}

Pool::Pool(Device device, Allocator* allocator)
    : device_(device), allocator_(allocator ? *allocator : allocator_for(device)) {
  configure(config_);
}

Pool::~Pool() {
  auto retained = std::move(retained_);  // cells report to the pool as they go
  retained.clear();
}

// ---------------------------------------------------------------- configuration

void Pool::configure(const DtrConfig& config) {
  const auto budget = config.budget;
  config_ = config;
  config_.budget = config_.budget;
  rng_state_ = config.seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  score_choice_ = ScoreChoice(prices_searches());  // a new run: dtr-next tries each again
  invalidate_all_walks();
  step_recompute_cost_ = 0;
  step_start_draws_ = total_.candidates_drawn;
  step_start_compute_ = total_.compute_seconds;
  rebuild_swappable();
  set_budget(budget);
}

void Pool::set_swap(bool on, double cost_per_byte) {
  config_.swap = on;
  config_.swap_cost_per_byte = cost_per_byte;
  rebuild_swappable();
}

void Pool::set_budget(std::optional<std::size_t> bytes) {
  pending_fraction_.reset();  // an explicit budget replaces a fraction not yet resolved
  const auto old = config_.budget;
  config_.budget = bytes;
  total_.budget = bytes;
  if (!bytes) return;
  if (!old) build_evicted_classes();
  try {
    make_room(0, "set_budget");
  } catch (const OutOfBudget&) {
    config_.budget = old;
    total_.budget = old;
    throw;
  }
}

void Pool::set_budget_fraction(double fraction, int measure_step) {
  REMAT_CHECK(fraction > 0 && fraction <= 1,
              "set_budget_fraction: the fraction must lie in (0, 1], got {}", fraction);
  REMAT_CHECK(measure_step >= 1, "set_budget_fraction: measure_step must be >= 1, got {}",
              measure_step);
  set_budget(std::nullopt);
  pending_fraction_ = fraction;
  steps_until_measured_ = measure_step;
  measured_peak_.reset();
  if (measure_step == 1) reset_peak();
}

void Pool::end_step_learning(bool failed) {
  // A failed step stopped early; one that ran was compared only if it followed the last one.
  const bool comparable =
      !diverged_ && !last_step_.empty() && (failed || step_calls_ == last_step_.calls());
  const std::uint64_t draws = total_.candidates_drawn - step_start_draws_;
  const double searches = prices_searches() ? static_cast<double>(draws) * kSecondsPerDraw : 0;
  score_choice_.end_step(config_.budget, comparable,
                         failed ? std::numeric_limits<double>::infinity() : step_recompute_cost_,
                         searches, total_.compute_seconds - step_start_compute_);
  step_recompute_cost_ = 0;
  step_start_draws_ = total_.candidates_drawn;
  step_start_compute_ = total_.compute_seconds;
  if (!failed) std::swap(last_step_, this_step_);  // a step cut short predicts nothing
  this_step_.clear();
  ++step_;
  step_calls_ = 0;
  diverged_ = false;
  invalidate_all_walks();  // caches_walks() may change
}

void Pool::fail_step() {
  if (learns_steps()) end_step_learning(true);
}

std::optional<std::size_t> Pool::end_step() {
  if (trace_) trace_->step_end();
  if (learns_steps()) end_step_learning(false);
  if (!pending_fraction_) return std::nullopt;
  if (--steps_until_measured_ == 1) reset_peak();  // the next step is the one measured
  if (steps_until_measured_ > 0) return std::nullopt;
  measured_peak_ = peak_resident_bytes_;
  const auto bytes = static_cast<std::size_t>(
      std::floor(*pending_fraction_ * static_cast<double>(*measured_peak_)));
  pending_fraction_.reset();
  set_budget(bytes);
  return bytes;
}

// ---------------------------------------------------------------- accounting

// Unsigned arithmetic throughout: sizes are byte counts, never differences.
void Pool::add_resident(std::size_t bytes) {
  resident_bytes_ += bytes;
  if (resident_bytes_ > peak_resident_bytes_) peak_resident_bytes_ = resident_bytes_;
  if (resident_bytes_ > total_.peak_resident_bytes) total_.peak_resident_bytes = resident_bytes_;
}

void Pool::sub_resident(std::size_t bytes) {
  resident_bytes_ -= bytes;
}

DtrStats Pool::stats() const {
  DtrStats s = total_.since(window_base_);
  s.peak_resident_bytes = peak_resident_bytes_;
  fill_memory_stats(s);
  return s;
}

DtrStats Pool::total_stats() const {
  DtrStats s = total_;
  fill_memory_stats(s);
  return s;
}

void Pool::fill_memory_stats(DtrStats& s) const {
  s.budget = config_.budget;
  s.fragmentation_bytes = allocator_.cached_bytes();
  s.held_bytes = resident_bytes_ + s.fragmentation_bytes;
  s.largest_free_block = allocator_.largest_free_block();
  s.swapped_bytes = swapped_bytes_;
}

void Pool::reset_stats() {
  window_base_ = total_;
  reset_peak();
}

// ---------------------------------------------------------------- candidates

void Pool::add_candidate(Cell& cell) {
  if (cell.candidate_index_ != std::numeric_limits<std::size_t>::max()) return;
  cell.candidate_index_ = candidates_.size();
  candidates_.push_back(&cell);
  update_swappable(cell);
}

void Pool::remove_candidate(Cell& cell) {
  const std::size_t i = cell.candidate_index_;
  if (i == std::numeric_limits<std::size_t>::max()) return;
  Cell* last = candidates_.back();
  candidates_[i] = last;
  last->candidate_index_ = i;
  candidates_.pop_back();
  cell.candidate_index_ = std::numeric_limits<std::size_t>::max();
  update_swappable(cell);
}

void Pool::update_swappable(Cell& cell) {
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  const bool wanted = config_.swap && cell.resident() && cell.candidate_index_ == kNone;
  const std::size_t i = cell.swappable_index_;
  if (wanted == (i != kNone)) return;
  if (wanted) {
    cell.swappable_index_ = swappable_.size();
    swappable_.push_back(&cell);
    return;
  }
  Cell* last = swappable_.back();
  swappable_[i] = last;
  last->swappable_index_ = i;
  swappable_.pop_back();
  cell.swappable_index_ = kNone;
}

void Pool::rebuild_swappable() {
  for (Cell* c : swappable_) c->swappable_index_ = std::numeric_limits<std::size_t>::max();
  swappable_.clear();
  if (config_.swap)
    for (Cell* c : cells_) update_swappable(*c);
}

std::size_t Pool::sample_size() const {
  const std::size_t n = candidates_.size();
  if (config_.sample != 0) return config_.sample;
  if (learns_steps() && score_choice_.small_sample()) return ScoreChoice::kSmallSample;
  return std::max<std::size_t>(
      256, static_cast<std::size_t>(std::ceil(2 * std::sqrt(static_cast<double>(n)))));
}

void Pool::prefetch_for_score(const Cell& c) {
  __builtin_prefetch(&c.pins_);
  __builtin_prefetch(&c.last_call_);
  __builtin_prefetch(&c.walk_cost_);
  __builtin_prefetch(&c.next_at_);
}

bool Pool::evict_batch(std::size_t bytes, std::size_t headroom, double below) {
  const std::size_t n = candidates_.size();
  if (n == 0) return false;
  const std::size_t k = sample_size();
  // Victims taken from one sample: the best-scored first, at most a quarter of the sample (the
  // first, and after it only cells taken along, see below).
  constexpr std::size_t kVictimShare = 4;
  std::size_t max_victims = std::max<std::size_t>(1, std::min(k, n) / kVictimShare);
  // Cells taken along after the first victim: tiny ones, and those whose own kernel costs less
  // than this search (its draws at kSecondsPerDraw each): evicted early, one costs at most its
  // kernel again, less than the search it spares.  (On our TreeLSTM's trace, kernels of 1.7 us
  // on average, this halved the search time at 0.3 to 0.6 of the peak with the same
  // recomputation; no op of the prototype's GPU logs is that cheap.)
  // On a CUDA device a record's seconds are its launch's host time (the kernels run
  // asynchronously), not the kernel's: there no cell is taken along for its cost.
  const bool by_cost = !device_.is_cuda();
  const double search_price = static_cast<double>(std::min(k, n)) * kSecondsPerDraw;
  auto taken_along = [&](const Cell* c) {
    return c->nbytes_ <= kTinyCell ||
           (by_cost && c->record_ && c->record_->seconds <= search_price);
  };
  using Scored = ScoredVictim;
  // Lower score first, ties to the lower cell id: the order victims are taken in.
  auto before = [](const Scored& a, const Scored& b) {
    return a.score < b.score || (a.score == b.score && a.cell->id_ < b.cell->id_);
  };
  std::vector<Scored>& best = victim_scratch_;  // the max_victims best so far, a max-heap
  best.clear();
  // The two best exact scores of cells not taken along.  Only the first victim and the cells
  // taken along ranked before the next other cell are taken (below), so no score past the
  // second matters: a walk past it may stop early too, and the victims stay the same (dtr_sim
  // on the prototype's logs, larger cells bounded so: 24% to 42% fewer metadata accesses under
  // dtr-next, msps, e* and dtr; tiny cells too: dtr-next's 0.78x again).
  // When no cell to take along was drawn, only the first victim is taken: no score past the best
  // matters (dtr-next on the LSTM and TreeLSTM logs scored half the drawn cells exactly for
  // the second-best one).
  constexpr double kNone = std::numeric_limits<double>::infinity();
  double large_best = kNone, large_second = kNone;
  // dtr-next's walks of evicted ancestors are long (on InceptionV4's and DenseNet-121's logs
  // most of its search): its candidates are scored in the order of a floor of their scores,
  // the score without that walk, so the bounds tighten first and a candidate whose floor is
  // past them is not walked at all.  Other heuristics score in the order drawn.
  const bool by_floor = learns_steps() && predicts();
  bool any_along = false;  // drawn, in the floor order: known before any cell is scored
  // A score past the worst kept one cannot enter the kept set, nor one past the large bound be
  // taken: walks stop there, and so does the floor order below.
  auto search_bound = [&] {
    const double large = by_floor && !any_along ? large_best : large_second;
    return std::min(best.size() < max_victims ? kNone : best.front().score, large);
  };
  auto consider = [&](Cell* c, const Heuristics::NextParts* parts) {
    if (c->pins_ > 0) return;
    const double bound = search_bound();
    const bool large = !taken_along(c);
    const Scored s{
        parts ? Heuristics::score(*this, *c, *parts, bound) : Heuristics::score(*this, *c, bound),
        c};
    if (large && s.score <= bound) {  // exact: the walk was not stopped
      large_second = std::max(large_best, std::min(large_second, s.score));
      large_best = std::min(large_best, s.score);
    }
    if (best.size() < max_victims) {
      best.push_back(s);
      std::push_heap(best.begin(), best.end(), before);
    } else if (before(s, best.front())) {
      std::pop_heap(best.begin(), best.end(), before);
      best.back() = s;
      std::push_heap(best.begin(), best.end(), before);
    }
  };
  std::vector<DrawnVictim>& drawn = floor_scratch_;
  drawn.clear();
  auto draw = [&](Cell* c) {
    if (!by_floor) return consider(c, nullptr);
    if (c->pins_ > 0) return;
    drawn.push_back({Heuristics::next_parts(*this, *c), c});
    any_along = any_along || taken_along(c);
  };
  total_.candidates_drawn += std::min(k, n);
  if (k >= n) {
    for (Cell* c : candidates_) draw(c);
  } else {
    // Deterministic sampling (xorshift seeded by the configuration): no scan of every cell.
    // A cell drawn twice is scored twice; the duplicate is skipped below.
    const FastMod mod(n);
    auto next_draw = [&] {
      rng_state_ ^= rng_state_ << 13, rng_state_ ^= rng_state_ >> 7, rng_state_ ^= rng_state_ << 17;
      return candidates_[mod(rng_state_)];
    };
    if (config_.heuristic == Heuristic::Random) {  // its scores come from the same generator
      for (std::size_t j = 0; j < k; ++j) draw(next_draw());
    } else {
      std::vector<Cell*>& sample = sample_scratch_;
      sample.clear();
      for (std::size_t j = 0; j < k; ++j) sample.push_back(next_draw());
      // The drawn cells lie scattered in memory, and scoring one reads lines of the cell and
      // then of its record: fetched ahead, two stages deep, their cache misses overlap.
      constexpr std::size_t kAhead = 8;
      for (std::size_t j = 0; j < k; ++j) {
        if (j + 2 * kAhead < k) prefetch_for_score(*sample[j + 2 * kAhead]);
        if (j + kAhead < k)
          if (const Record* r = sample[j + kAhead]->record_.get()) __builtin_prefetch(&r->seconds);
        draw(sample[j]);
      }
    }
    if (best.empty() && drawn.empty()) {  // every sample was pinned: fall back to a full pass
      total_.candidates_drawn += n;
      for (Cell* c : candidates_) draw(c);
    }
  }
  if (by_floor) {
    // None to take along drawn: the first victim is the only one taken, so the best one is all that
    // is kept (ordering and sorting the others was a fifth of TreeLSTM's search at 0.3).
    if (!any_along) max_victims = 1;
    // Scored once: consider() takes the parts next_parts computed for the floor, in floor
    // order, ties to the lower index.  Both bounds only fall and every later floor is at least
    // this one: a floor past either ends the loop.  (Past the second-best large score, even a
    // cell taken along would be taken after another, which the loop taking victims below never
    // does.)  The loop mostly stops within the first few dozen of the 256 drawn: the lowest
    // floors are found by a scan until the bounds are finite, then every floor already past
    // them is dropped and the rest come off a heap (TreeLSTM's log at 0.3: 147 of 255 left, 52
    // scored; the heap of all 255 had been a sixth of the search there).  A floor whose gone
    // ancestors were not walked yet (NextParts::exact) is keyed by the least it can be and
    // walked once that key comes first: the cells come in the same order, and on the Unrolled
    // GAN's log, where each in-place write drops the kept walks, 7 to 12 of some 150 to 190.
    std::vector<FloorKey>& order = floor_order_scratch_;
    order.clear();
    // A key is its floor's bits, sign-flipped so that they order as the doubles do (floors
    // are never NaN), then the index: compared as one unsigned integer, the heap's sift steps
    // take no branch, where compares of doubles mispredicted on most of them.
    auto key_of = [](double floor, std::uint32_t index) {
      const std::uint64_t bits = std::bit_cast<std::uint64_t>(floor);
      return FloorKey{bits ^ (bits >> 63 ? ~std::uint64_t{0} : std::uint64_t{1} << 63), index};
    };
    for (std::size_t i = 0; i < drawn.size(); ++i)
      order.push_back(key_of(drawn[i].parts.floor, static_cast<std::uint32_t>(i)));
    auto after = [](const FloorKey& a, const FloorKey& b) {
      return (static_cast<UInt128>(a.order) << 32 | a.index) >
             (static_cast<UInt128>(b.order) << 32 | b.index);
    };
    // Past the bound (with a relative margin, as the walks' bounds): compared as keys too.
    auto limit_of = [&](double bound) { return key_of(bound + 1e-9 * std::abs(bound), 0).order; };
    // A key that was only the least its floor could be becomes the floor.
    auto complete = [&](FloorKey& key) {
      DrawnVictim& d = drawn[key.index];
      Heuristics::complete_parts(*this, *d.cell, d.parts);
      key = key_of(d.parts.floor, key.index);
    };
    constexpr std::size_t kScans = 4;  // then a heap of all, bounded or not
    std::size_t live = order.size(), scans = 0;
    bool heaped = false;
    while (live > 0) {
      const double bound = search_bound();
      if (!heaped && (bound < kNone || scans == kScans)) {
        std::size_t kept = 0;  // without branches: which floors survive is not predictable
        const std::uint64_t limit = limit_of(bound);
        for (std::size_t i = 0; i < live; ++i) {
          order[kept] = order[i];
          kept += order[i].order <= limit;
        }
        live = kept;
        std::make_heap(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(live), after);
        heaped = true;
        continue;
      }
      if (heaped) {
        std::pop_heap(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(live), after);
      } else {
        // A key that leads the pass but is only the least its floor can be is completed on
        // the spot: the lowest found is exact, and no scan is spent on a key that moves.
        std::size_t lowest = live;
        auto leads = [&](std::size_t i) {
          return lowest == live || after(order[lowest], order[i]);
        };
        for (std::size_t i = 0; i < live; ++i) {
          if (!leads(i)) continue;
          if (!drawn[order[i].index].parts.exact) {
            complete(order[i]);
            if (!leads(i)) continue;
          }
          lowest = i;
        }
        std::swap(order[lowest], order[live - 1]);
        ++scans;
      }
      FloorKey& top = order[live - 1];
      if (top.order > limit_of(bound)) break;
      const DrawnVictim& d = drawn[top.index];
      if (!d.parts.exact) {  // off the heap: back in line under its floor
        complete(top);
        std::push_heap(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(live), after);
        continue;
      }
      --live;
      consider(d.cell, &d.parts);
    }
  }
  if (best.empty()) return false;
  std::sort_heap(best.begin(), best.end(), before);
  // Evicting a cell raises its neighbours' scores (their e* grows): a neighbour of a victim of
  // this batch is left for a later search, which scores it afresh.
  const std::uint64_t stamp = Heuristics::new_stamp();
  std::size_t freed = 0;
  bool any = false;
  for (const Scored& s : best) {
    Cell& c = *s.cell;
    // After the first victim only cells taken along are, to the request and on to the headroom:
    // for them a search per victim is what costs, while larger cells taken on stale scores
    // (a fresh search would see their neighbourhoods changed) only add recomputation.
    const bool done =
        config_.single_victim || !taken_along(&c) || (freed >= bytes && freed >= headroom);
    if (any && (done || c.mark_ == stamp)) {
      if (done) break;
      continue;
    }
    // A swap scores lower.  Without one (below is infinity) a victim scoring infinity is
    // still taken when it is the best there is: a poor victim beats OutOfBudget.
    if (s.score >= below && below < std::numeric_limits<double>::infinity()) break;
    if (!c.resident() || c.pins_ > 0 || !c.replayable()) continue;  // a duplicate draw
    freed += c.nbytes_;
    evict(c);
    any = true;
    Heuristics::mark_neighbours(c, stamp);
  }
  return any;
}

void Pool::invalidate_walks(Cell& cell) {
  // Until a search keeps a walk (unbudgeted, or before memory first runs short in a step)
  // there is nothing to clear: released values evicted by the eager-evict policy would
  // otherwise pay for a walk down their evicted readers each.
  if (!caches_walks() || !walks_kept_) return;
  OwnWorkTimer timer{total_.bookkeeping_seconds, timing_own_work_};
  cell.walk_epoch_ = 0;
  // Walks are kept only by searches, so between two searches the kept walks only go.  A cell
  // whose readers this pass walked down since the last kept walk (invalidate_mark_) has none
  // left below it: a walk from below through it would have been cleared then, and a path
  // through a cell that was resident then was walked when that cell left the resident state.
  // So a later pass stops there (TreeLSTM's log: released cells walked the same evicted
  // subtrees again for every leaf, 27% of a dtr-next replay).
  if (walk_kept_since_invalidate_) ++invalidate_stamp_, walk_kept_since_invalidate_ = false;
  const std::uint64_t stamp = invalidate_stamp_;
  if (cell.invalidate_mark_ == stamp) return;
  cell.invalidate_mark_ = stamp;
  std::vector<Cell*>& stack = invalidate_scratch_;
  stack.assign(1, &cell);
  while (!stack.empty()) {
    const Cell& c = *stack.back();
    stack.pop_back();
    for (const auto& w : c.dependents_) {
      ++total_.metadata_accesses;
      Cell* const d = w.get();
      if (!d) continue;
      d->walk_epoch_ = 0;
      // A walk through an evicted reader goes on to its readers.
      if (d->state_ == CellState::Evicted && d->record_ && d->invalidate_mark_ != stamp) {
        d->invalidate_mark_ = stamp;
        stack.push_back(d);
      }
    }
  }
}

void Pool::build_evicted_classes() {
  if (config_.heuristic != Heuristic::DtrEq && config_.heuristic != Heuristic::DtrNext) return;
  for (Cell* c : cells_)
    if (c->state_ == CellState::Evicted && c->record_ && !c->evicted_class_)
      Heuristics::on_evicted(*this, *c);
}

// ---------------------------------------------------------------- memory

void Pool::make_room(std::size_t bytes, std::string_view op) {
  if (!config_.budget) return;
  const std::size_t budget = *config_.budget;
  // What the allocator will cache after the allocation: a reused block leaves its cache, a
  // fresh segment may bring more into it.
  auto cached_after = [&] {
    return bytes ? allocator_.cached_after(bytes) : allocator_.cached_bytes();
  };
  // Most calls fit, checked before the timer starts: its two clock reads cost more than the
  // check (on the Unrolled GAN's log at 0.5 of its peak, 5% of the search time).
  if (resident_bytes_ + bytes + cached_after() <= budget) return;
  OwnWorkTimer timer{total_.search_seconds, timing_own_work_};
  // Copies to host memory count as swap time, not search (destroyed before the timer).
  struct ExcludeSwaps {
    double& search;
    const double& swap;
    const double swap_at_start;
    ~ExcludeSwaps() { search -= swap - swap_at_start; }
  } exclude{total_.search_seconds, total_.swap_seconds, total_.swap_seconds};
  const std::size_t cls = bytes ? allocator_.size_class(bytes) : 0;
  // Tiny cells (a TreeLSTM's hidden states) would cost one search per few hundred bytes: free up
  // to a headroom of 1/64 of the budget (at most 1 MiB) in tiny cells at once.  On the TreeLSTM
  // at half its peak this cut search time 15x against one victim per search, for about 10% more
  // recomputed ops; 1/256 gave half the saving, 1/32 more recomputation.
  const std::size_t headroom = std::min<std::size_t>(budget / 64, std::size_t{1} << 20);
  while (true) {
    const std::size_t cached = cached_after();
    const std::size_t held = resident_bytes_ + bytes + cached;
    if (held <= budget) return;
    const std::size_t excess = held - budget;
    if (allocator_.cached_bytes() > 0 && allocator_.release_cached(excess, cls) > 0) continue;
    // Enough bytes are free but in pieces too small: first try a victim whose block joins free
    // neighbours into a block that fits.
    if (bytes && evict_to_fit(cls)) continue;
    if (config_.swap) {
      if (Cell* out = swap_victim()) {
        // Priced, a swap competes with the eviction candidates; unpriced, it comes first (a
        // copy on the CPU costs less than recomputing an activation: ResNet-20 at 0.15 of its
        // peak ran 2.79x the unbudgeted step swapping first, 3.89x evicting first).
        const double price = config_.swap_cost_per_byte;
        if (price <= 0 ||
            !evict_batch(
                excess, headroom,
                Heuristics::swap_score(*this, *out, 2 * price * static_cast<double>(out->nbytes_))))
          swap_out(*out);
        continue;
      }
    }
    if (!evict_batch(excess, headroom)) {
      // What the allocator would hold beyond the tensors: on a device, free pieces of segments
      // in use and the rest of a fresh segment, which can exceed a small budget by themselves.
      UnevictableBytes u = unevictable_bytes();
      u.cached = cached;
      throw OutOfBudget(std::string(op), bytes, budget, u);
    }
  }
}

bool Pool::evict_to_fit(std::size_t size) {
  if (!allocator_.merges_free_blocks() || allocator_.cached_bytes() < size ||
      allocator_.has_cached(size))
    return false;
  Cell* chosen = nullptr;
  double best = std::numeric_limits<double>::infinity(), any = best;
  for (Cell* c : candidates_) {
    if (c->pins_ > 0) continue;
    const bool fits = allocator_.fits_if_freed(c->block_, size);
    // Scored to the end when it fits (its score decides); otherwise only up to the best so far.
    const double score =
        Heuristics::score(*this, *c, fits ? std::numeric_limits<double>::infinity() : any);
    any = std::min(any, score);
    if (!fits) continue;
    if (!chosen || score < best || (score == best && c->id_ < chosen->id_))
      chosen = c, best = score;
  }
  // A victim that makes the request fit may cost more than the best victim overall; taken only
  // within twice its score.  On the prototype's logs with segments (dtr_sim --segments, dtr-eq
  // at 0.3, 0.5, 0.7) 19 of 24 runs finished with this rule (1x: 17, 4x: 17, 16x: 18), 16
  // without evictions to fit, 15 taking the best fitting victim whatever its score; 20 on the
  // CPU's exact-size cache.
  constexpr double kFitScoreFactor = 2;
  if (chosen && best > kFitScoreFactor * any) chosen = nullptr;
  if (!chosen) return false;
  evict(*chosen);
  ++total_.fragmentation_evictions;
  return true;
}

Block Pool::allocate_block(std::size_t bytes, std::string_view op) {
  while (true) {
    const Block b = allocator_.allocate(bytes);
    if (b.ptr) return b;
    // The memory itself ran out (a device's, below the budget or without one): evict, first
    // where that joins free blocks into one that fits, and retry.
    const std::size_t cls = allocator_.size_class(bytes);
    if (evict_to_fit(cls) || evict_batch(bytes, 0) || (config_.swap && swap_out_one())) continue;
    const std::size_t held = resident_bytes_ + allocator_.cached_bytes();
    throw OutOfBudget(
        fmt::format("{} (the {} memory is exhausted at {} bytes held)", op, device_, held), bytes,
        config_.budget.value_or(held), unevictable_bytes());
  }
}

void Pool::materialize(Cell& cell, std::string_view op) {
  make_room(cell.nbytes_, op);
  cell.block_ = allocate_block(cell.nbytes_, op);
  const bool was_evicted = cell.state_ == CellState::Evicted;
  cell.state_ = CellState::Resident;
  if (was_evicted && cell.record_) invalidate_walks(cell);
  cell.last_access_ = tick();
  ++resident_cells_;
  add_resident(cell.nbytes_);
  if (cell.replayable()) add_candidate(cell);
  update_swappable(cell);
}

void Pool::copy_host(void* dst, const void* src, std::size_t bytes, bool to_host) const {
  if (!device_.is_cuda())
    std::memcpy(dst, src, bytes);
  else if (to_host)
    detail::cuda_memory::copy_to_host(dst, src, bytes);
  else
    detail::cuda_memory::copy_from_host(dst, src, bytes);
}

bool Pool::swap_out_one() {
  Cell* victim = swap_victim();
  if (!victim) return false;
  swap_out(*victim);
  return true;
}

Cell* Pool::swap_victim() const {
  Cell* victim = nullptr;
  for (Cell* c : swappable_) {  // resident and not evictable (update_swappable)
    // An output before its kernel ran has neither a handle nor a reader yet (a value kept only
    // for its readers' replays has readers).
    if (c->pins_ > 0 || c->nbytes_ == 0 || (!c->has_handles() && !c->has_live_dependents()))
      continue;
    if (!victim || c->last_access_ < victim->last_access_ ||
        (c->last_access_ == victim->last_access_ && c->id_ < victim->id_))
      victim = c;
  }
  return victim;
}

void Pool::swap_out(Cell& c) {
  Timer timer{total_.swap_seconds};
  // The simulator's accounting allocator holds no bytes to copy: the state change is the swap.
  void* host = nullptr;
  if (allocator_.backed()) {
    host = ::operator new (c.nbytes_, std::align_val_t{kBufferAlignment});
    copy_host(host, c.block_.ptr, c.nbytes_, /*to_host=*/true);
  }
  free_buffer(c, CellState::Swapped);
  c.host_ = host;
  swapped_bytes_ += c.nbytes_;
  ++total_.swap_outs;
  total_.swap_bytes += c.nbytes_;
}

void Pool::swap_in(Cell& cell, std::string_view op) {
  make_room(cell.nbytes_, op);
  const Block block = allocate_block(cell.nbytes_, op);
  {
    Timer timer{total_.swap_seconds};
    if (cell.host_) copy_host(block.ptr, cell.host_, cell.nbytes_, /*to_host=*/false);
  }
  free_host(cell);
  cell.block_ = block;
  cell.state_ = CellState::Resident;
  cell.last_access_ = tick();
  ++resident_cells_;
  add_resident(cell.nbytes_);
  ++total_.swap_ins;
  total_.swap_bytes += cell.nbytes_;
  if (cell.replayable()) add_candidate(cell);
  update_swappable(cell);
}

void Pool::free_host(Cell& cell) {
  if (cell.host_) ::operator delete (cell.host_, std::align_val_t{kBufferAlignment});
  cell.host_ = nullptr;
  swapped_bytes_ -= cell.nbytes_;
}

void Pool::free_buffer(Cell& cell, CellState next) {
  if (cell.state_ == CellState::Swapped) free_host(cell);
  if (cell.state_ == CellState::Resident) {
    remove_candidate(cell);
    allocator_.deallocate(cell.block_);
    cell.block_ = {};
    --resident_cells_;
    sub_resident(cell.nbytes_);
    // Unbudgeted, the cache may hold at most twice the run's peak; under a budget make_room
    // trims it.  Blocks are cached by exact size, so at a step's peak some cached blocks have
    // the wrong size for what is then allocated: with a cap of one peak, a ResNet step gave
    // back and faulted in again a few 2 MiB blocks every step.
    if (!config_.budget) {
      const std::size_t cached = allocator_.cached_bytes();
      const std::size_t cap = 2 * total_.peak_resident_bytes;
      if (cached > cap) allocator_.release_cached(cached - cap);
    }
  }
  const bool was_evicted = cell.state_ == CellState::Evicted;
  cell.state_ = next;
  if (was_evicted != (next == CellState::Evicted) && cell.record_) invalidate_walks(cell);
  update_swappable(cell);
}

// ---------------------------------------------------------------- cells

std::shared_ptr<Cell> Pool::new_constant(std::size_t nbytes, std::string_view op) {
  auto cell = std::allocate_shared<Cell>(RecyclingAllocator<Cell>(), *this, nbytes, ++cell_ids_);
  materialize(*cell, op);
  if (trace_) trace_->constant(*cell);
  return cell;
}

std::shared_ptr<Cell> Pool::new_output(std::size_t nbytes, std::string_view op) {
  auto cell = std::allocate_shared<Cell>(RecyclingAllocator<Cell>(), *this, nbytes, ++cell_ids_);
  materialize(*cell, op);
  return cell;
}

void Pool::note_call(Record& record, std::span<const std::shared_ptr<Cell>> outputs) {
  const std::uint64_t op = std::hash<std::string_view>{}(record.producer->name());
  record.step = step_;
  record.step_call = step_calls_;
  if (!diverged_ && (step_calls_ >= last_step_.calls() || last_step_.op(step_calls_) != op))
    diverged_ = true;
  this_step_.add_call(op, outputs.size());
  for (const auto& out : outputs) {
    out->last_call_ = program_calls_;
    out->made_in_step_ = step_;
    out->made_at_call_ = step_calls_;
  }
  ++step_calls_;
  ++program_calls_;
}

void Pool::advance_compute_clock(const Record& record) {
  clock_ += static_cast<std::uint64_t>(std::llround(record.cost(config_.cost) * 1e9));
}

void Pool::note_use(Cell& cell) {
  cell.last_call_ = program_calls_;
  if (cell.made_in_step_ == step_)
    this_step_.add_use(cell.made_at_call_, cell.output_index_, step_calls_);
}

void Pool::record_call(const std::shared_ptr<Record>& record,
                       std::span<const std::shared_ptr<Cell>> outputs) {
  OwnWorkTimer timer{total_.bookkeeping_seconds, timing_own_work_};
  if (learns_steps()) note_call(*record, outputs);
  if (config_.compute_clock) {
    advance_compute_clock(*record);
    for (const auto& out : outputs) out->last_access_ = clock_;  // stamped after the compute
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    Cell& out = *outputs[i];
    out.record_ = record;
    out.output_index_ = static_cast<int>(i);
    out.unreplayable_ = false;
    // Outputs are fresh cells (new_output): no kept walk or gone cost, no readers yet, so
    // nothing to invalidate on this per-op path.
    if (out.resident() && out.replayable()) add_candidate(out);
  }
  for (const auto& in : record->inputs) {
    auto& deps = in->dependents_;
    if (deps.size() >= in->prune_at_) {
      deps.erase_if([](const Cell::Reader& w) { return w.expired(); });
      in->prune_at_ = std::max<std::size_t>(8, deps.size() * 2);
    }
    for (const auto& out : outputs) deps.push_back(out);
  }
  ++total_.calls;
  ++total_.executions;
  total_.compute_seconds += record->seconds;
  // A producer that knows its cost (the offline simulator's) sets time_cost itself.
  // Only the time cost model reads the estimate: other models skip the hash and lookup.
  // Unbudgeted nothing is scored: no lookup (records then cost their own measured time),
  // unless a trace records the calls: its TIME_COST is what the time cost model would score,
  // so dtr_sim scores a replay of an unbudgeted run as a budgeted one would (16 ResNet-20
  // steps at 0.3 of the peak, priced at each call's own noisy time: dtr-eq 0.342, dtr-next
  // 0.352; priced so: 0.378 and 0.331, as in the runtime, which rebuilds for 35 and 28 ms).
  if (record->time_cost == 0 && (trace_ || (config_.cost == CostModel::Time && config_.budget))) {
    record->time_cost = kernel_times_.observe(*record, record->seconds);
    record->time_cost_estimated = true;
  }
  if (trace_) trace_->call(*record, outputs);
  if (config_.evict_after_every_op) {
    const std::vector<Cell*> all = candidates_;  // evict() edits the vector
    for (Cell* c : all)
      if (c->pins_ == 0) evict(*c);
  }
  if (timeline_on_) [[unlikely]]
    sample_timeline(record->producer.get());
}

void Pool::pin(Cell& cell, std::string_view op) {
  ensure_resident(cell, op);
  ++cell.pins_;
  if (learns_steps()) note_use(cell);
}

void Pool::unpin(Cell& cell) {
  --cell.pins_;
}

void Pool::ensure_resident(Cell& target, std::string_view op) {
  target.last_access_ = tick();
  if (target.resident()) return;
  if (target.swapped()) return swap_in(target, op);
  // Iterative rematerialization: a frame per record being rebuilt, its resident inputs pinned
  // while the missing ones are rebuilt.  No recursion on the C++ stack.
  struct Frame {
    Cell* cell;
    std::vector<Cell*> pinned;
    bool visited = false;
  };
  std::vector<Frame> stack;
  auto unpin_all = [&] {
    for (auto& f : stack)
      for (Cell* c : f.pinned) --c->pins_;
  };
  // A replay that runs out of budget while the frames below it hold their resident inputs
  // pinned lets go of those pins and runs again: what they kept may be evicted meanwhile and is
  // rebuilt when they resume, more recomputation instead of OutOfBudget (ResNet-20 under
  // dtr-next at a quarter of its peak: a rebuild through eight records pinned 16.5 of the
  // 24.2 MiB).  After kReleases such releases in one call a failure stands: frames that keep
  // evicting each other's inputs would never finish.
  std::size_t releases = 0;
  constexpr std::size_t kReleases = 64;
  auto check = [&](Cell& c) {
    if (c.swapped()) return;
    REMAT_CHECK(c.state_ != CellState::Banished && c.record_,
                "{}: cell {} ({} bytes) was freed for good and cannot be recomputed", op, c.id_,
                c.nbytes_);
    REMAT_CHECK(
        !c.unreplayable_,
        "{}: cell {} ({} bytes) cannot be recomputed: an input of its producer {} was banished", op,
        c.id_, c.nbytes_, c.record_->producer->name());
  };
  try {
    check(target);
    stack.push_back({&target, {}});
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.cell->resident()) {  // rebuilt as a sibling output of another replay
        for (Cell* c : f.pinned) --c->pins_;
        stack.pop_back();
        continue;
      }
      if (f.cell->swapped()) {  // an input in host memory: copied back, nothing recomputed
        swap_in(*f.cell, op);
        stack.pop_back();
        continue;
      }
      Record& r = *f.cell->record_;
      // DtrConfig::stamp_inputs_first: every input is stamped on the frame's first visit, before
      // anything below it is recomputed; otherwise each when it is pinned, once resident.
      if (!f.visited && config_.stamp_inputs_first)
        for (const auto& in : r.inputs) in->last_access_ = tick();
      f.visited = true;
      // Rebuild first the missing input whose own record misses the most inputs: the deep
      // chain goes first, so cheap siblings are not held pinned all along it.
      Cell* missing = nullptr;
      std::size_t missing_depth = 0;
      for (const auto& in : r.inputs) {
        if (in->resident()) continue;
        std::size_t depth = 0;
        if (in->record_ && !in->swapped())
          for (const auto& grand : in->record_->inputs) depth += grand->resident() ? 0 : 1;
        if (!missing || depth > missing_depth) missing = in.get(), missing_depth = depth;
      }
      // Keep what is already resident for this record while the rest is rebuilt.
      for (const auto& in : r.inputs) {
        if (in->resident() &&
            std::find(f.pinned.begin(), f.pinned.end(), in.get()) == f.pinned.end()) {
          ++in->pins_;
          if (!config_.stamp_inputs_first) in->last_access_ = tick();
          f.pinned.push_back(in.get());
        }
      }
      if (missing) {
        check(*missing);
        stack.push_back({missing, {}});
        continue;
      }
      try {
        replay(r, op);
      } catch (const OutOfBudget&) {
        const bool held_below = std::any_of(stack.begin(), stack.end() - 1,
                                            [](const Frame& g) { return !g.pinned.empty(); });
        if (!held_below || ++releases > kReleases) throw;
        for (auto g = stack.begin(); g != stack.end() - 1; ++g) {
          for (Cell* c : g->pinned) --c->pins_;
          g->pinned.clear();
        }
        continue;  // this frame again, its own inputs still pinned
      }
      for (Cell* c : f.pinned) --c->pins_;
      stack.pop_back();
    }
  } catch (...) {
    unpin_all();
    throw;
  }
}

void Pool::replay(Record& r, std::string_view op) {
  struct Out {
    std::shared_ptr<Cell> cell;
    Block scratch;
    bool allocated = false;  // given a buffer by this replay, not yet written
  };
  std::vector<Out> outs(r.outputs.size());
  std::vector<KernelArg> in_args(r.inputs.size()), out_args(r.outputs.size());
  auto release = [&] {
    for (auto& o : outs) {
      if (o.cell && o.cell->pins_ > 0) --o.cell->pins_;
      if (o.scratch.ptr) {
        allocator_.deallocate(o.scratch);
        sub_resident(r.output_metas[&o - outs.data()].nbytes());
      }
    }
  };
  double step_cost = r.cost(config_.cost);  // what dtr-next's trials count for this rebuild
  try {
    for (std::size_t i = 0; i < r.outputs.size(); ++i) {
      auto c = r.outputs[i].lock();
      if (c && c->record_.get() == &r) {
        if (c->swapped()) {
          swap_in(*c, op);  // rewritten with the same bytes
        } else if (!c->resident()) {
          const std::uint64_t stamp = c->last_access_;
          materialize(*c, op);
          outs[i].allocated = true;
          if (config_.keep_stamp_on_remat) c->last_access_ = stamp;
          OwnWorkTimer timer{total_.bookkeeping_seconds, timing_own_work_};
          Heuristics::on_rematerialized(*this, *c);
        }
        ++c->pins_;
        outs[i].cell = c;
        out_args[i] = {&r.output_metas[i], c->block_.ptr};
      } else {
        // The output died: the kernel still writes it, into a short-lived buffer.
        const std::size_t n = r.output_metas[i].nbytes();
        make_room(n, op);
        outs[i].scratch = allocate_block(n, op);
        add_resident(n);
        out_args[i] = {&r.output_metas[i], outs[i].scratch.ptr};
      }
    }
    for (std::size_t i = 0; i < r.inputs.size(); ++i)
      in_args[i] = {&r.input_metas[i], r.inputs[i]->block_.ptr};
    const auto t0 = Clock::now();
    r.producer->execute(in_args, out_args);
    if (config_.compute_clock) advance_compute_clock(r);
    const double seconds = seconds_since(t0);
    total_.recompute_seconds += seconds;
    if (r.time_cost_estimated && config_.cost == CostModel::Time) {
      // dtr-next's trials price the step's rebuilds by what this op's rebuilds take, not by its
      // fastest original run; other heuristics only fold the run into that fastest one.
      if (learns_steps())
        step_cost = kernel_times_.observe_rematerialization(r, seconds);
      else
        kernel_times_.observe(r, seconds);
    }
  } catch (...) {
    release();
    // Outputs given a buffer but never written go back to evicted: a caller that goes on after
    // the error (ensure_resident's retry, a benchmark's next trial) must not read them.
    for (auto& o : outs) {
      if (!o.allocated || !o.cell || !o.cell->resident() || o.cell->pins_ > 0) continue;
      free_buffer(*o.cell, CellState::Evicted);
      if (config_.budget) Heuristics::on_evicted(*this, *o.cell);
    }
    throw;
  }
  release();
  step_recompute_cost_ += step_cost;
  ++total_.rematerializations;
  ++total_.executions;
}

void Pool::evict(Cell& cell) {
  REMAT_CHECK(cell.resident() && cell.pins_ == 0 && cell.replayable(),
              "evict: cell {} is not an evictable resident cell", cell.id_);
  free_buffer(cell, CellState::Evicted);
  ++total_.evictions;
  if (config_.budget) Heuristics::on_evicted(*this, cell);
}

void Pool::banish(Cell& cell) {
  free_buffer(cell, CellState::Banished);
  forget_gone_costs();  // its record, and its readers' replays, are gone
  // Resident dependents can no longer be recomputed: they leave the candidates for good.
  for (const auto& w : cell.dependents_) {
    if (auto d = w.lock()) {
      d->unreplayable_ = true;
      remove_candidate(*d);
    }
  }
  if (cell.record_) release_later(std::move(cell.record_));
}

void Pool::make_constant(Cell& cell) {
  if (!cell.record_) return;
  invalidate_walks(cell);
  forget_gone_costs();
  remove_candidate(cell);
  auto& outs = cell.record_->outputs;
  if (static_cast<std::size_t>(cell.output_index_) < outs.size()) outs[cell.output_index_].reset();
  release_later(std::move(cell.record_));
  cell.evicted_class_.reset();
}

std::shared_ptr<Cell> Pool::begin_write(Cell& cell, bool overwrite, std::string_view op) {
  if (trace_) trace_->begin_write(overwrite);
  pin(cell, op);
  if (!cell.has_live_dependents()) return nullptr;  // nothing can replay from the old value
  if (freeze_readers(cell)) return nullptr;         // nor can it now
  try {
    if (!overwrite) {
      copy_on_write(cell);
      return nullptr;
    }
    auto old =
        std::allocate_shared<Cell>(RecyclingAllocator<Cell>(), *this, cell.nbytes_, ++cell_ids_);
    transfer_identity(cell, *old);
    ++old->pins_;  // read by the kernel
    try {
      materialize(cell, op);
    } catch (...) {
      --old->pins_;
      transfer_identity(*old, cell);  // OutOfBudget: give the cell its bytes back untouched
      throw;
    }
    return old;
  } catch (...) {
    unpin(cell);
    throw;
  }
}

void Pool::finish_write(Cell& cell, const Record& mutation) {
  unpin(cell);
  make_constant(cell);
  cell.made_in_step_ = 0;  // a new value, which no call of this step made
  ++cell.version_;
  ++total_.calls;
  ++total_.executions;
  total_.compute_seconds += mutation.seconds;
  if (trace_) trace_->mutate(mutation, cell);
  if (timeline_on_) [[unlikely]]
    sample_timeline(mutation.producer.get());
}

bool Pool::freeze_readers(Cell& cell, bool or_equal) {
  constexpr std::size_t kMaxWalk = 4096;  // past this, copying is the cheaper bookkeeping
  std::vector<std::shared_ptr<Cell>> stack, freeze, drop;
  std::unordered_set<const Cell*> seen;
  auto push_readers = [&](const Cell& c) {
    for (const auto& w : c.dependents_) {
      auto d = w.lock();
      if (d && d->record_ && d->state_ != CellState::Banished && seen.insert(d.get()).second)
        stack.push_back(std::move(d));
    }
  };
  // Walk down from the cell through evicted readers that no tensor holds (eager eviction keeps
  // them only so that their own readers can be recomputed) to the resident readers beyond.
  std::size_t bytes = 0;  // what becomes unevictable instead of the copy
  push_readers(cell);
  while (!stack.empty()) {
    if (seen.size() > kMaxWalk) return false;
    auto d = std::move(stack.back());
    stack.pop_back();
    if (d->has_value()) {
      bytes += d->nbytes_;
      if (bytes > cell.nbytes_ || (bytes == cell.nbytes_ && !or_equal)) return false;
      freeze.push_back(std::move(d));
    } else {
      if (d->has_handles()) return false;  // a tensor may read it: it must stay recomputable
      push_readers(*d);
      drop.push_back(std::move(d));
    }
  }
  for (const auto& d : freeze) make_constant(*d);
  for (const auto& d : drop) banish(*d);  // nothing is left that could need it
  cell.dependents_.clear();
  return true;
}

void Pool::copy_on_write(Cell& cell) {
  // Its bytes are copied: a replayed WRITE may find it evicted.  (Only then: a resident cell's
  // stamp stays as the write's pin left it.)
  if (!cell.resident()) ensure_resident(cell, "copy_on_write");
  auto old =
      std::allocate_shared<Cell>(RecyclingAllocator<Cell>(), *this, cell.nbytes_, ++cell_ids_);
  ++cell.pins_;  // keep the bytes while the new buffer is found
  try {
    materialize(*old, "copy_on_write");
  } catch (...) {
    --cell.pins_;
    throw;
  }
  --cell.pins_;
  invalidate_all_walks();  // readers are rewired to `old` (resident, as `cell` was; rare)
  // Swap buffers so `old` keeps the old bytes in place; then copy them back into `cell`.
  std::swap(old->block_, cell.block_);
  // The simulator's accounting allocator holds no bytes: its addresses are never dereferenced.
  if (allocator_.backed()) std::memcpy(cell.block_.ptr, old->block_.ptr, cell.nbytes_);
  old->state_ = CellState::Resident;
  update_swappable(*old);
  old->record_ = std::move(cell.record_);
  old->output_index_ = cell.output_index_;
  old->made_in_step_ = cell.made_in_step_;
  old->made_at_call_ = cell.made_at_call_;
  old->unreplayable_ = cell.unreplayable_;
  cell.unreplayable_ = false;
  remove_candidate(cell);
  if (old->record_) {
    old->record_->outputs[old->output_index_] = old;
    if (old->replayable()) add_candidate(*old);
  }
  old->dependents_ = std::move(cell.dependents_);
  cell.dependents_.clear();
  for (const auto& w : old->dependents_) {
    auto d = w.lock();
    if (!d || !d->record_) continue;
    for (auto& in : d->record_->inputs)
      if (in.get() == &cell) in = old;
  }
}

void Pool::transfer_identity(Cell& from, Cell& to) {
  REMAT_CHECK(from.nbytes_ == to.nbytes_ && from.resident() && !to.resident() && !to.record_,
              "transfer_identity: cells {} and {} do not match", from.id_, to.id_);
  // `to` takes the old bytes, the record that computes them, and the readers of the old value.
  const bool was_candidate = from.candidate_index_ != std::numeric_limits<std::size_t>::max();
  invalidate_all_walks();  // readers are rewired to `to` (resident, as `from` was; rare)
  remove_candidate(from);
  to.block_ = from.block_;
  to.state_ = CellState::Resident;
  to.last_access_ = from.last_access_;
  ++resident_cells_;
  from.block_ = {};
  from.state_ = CellState::Evicted;
  update_swappable(from);
  update_swappable(to);
  --resident_cells_;
  to.record_ = std::move(from.record_);
  to.output_index_ = from.output_index_;
  to.made_in_step_ = from.made_in_step_;
  to.made_at_call_ = from.made_at_call_;
  from.made_in_step_ = 0;
  to.unreplayable_ = from.unreplayable_;
  from.unreplayable_ = false;
  if (to.record_) to.record_->outputs[to.output_index_] = to.shared_from_this();
  to.dependents_ = std::move(from.dependents_);
  from.dependents_.clear();
  for (const auto& w : to.dependents_) {
    auto d = w.lock();
    if (!d || !d->record_) continue;
    for (auto& in : d->record_->inputs)
      if (in.get() == &from) in = to.shared_from_this();
  }
  if (was_candidate) add_candidate(to);
}

std::shared_ptr<Storage> Pool::handle(const std::shared_ptr<Cell>& cell) {
  // The handle family is a shared_ptr aliasing the cell whose deleter tells the pool when the
  // last tensor let go; its use count is the number of live tensor handles.
  if (cell->handles_ > 0) {
    if (auto existing = cell->external_.lock()) return existing;
  }
  auto on_last = [keep = cell](Storage*) mutable {
    keep->handles_ = 0;
    keep->pool_.on_last_handle(*keep);
    keep.reset();
  };
  std::shared_ptr<Storage> h(cell.get(), std::move(on_last), RecyclingAllocator<Storage>());
  cell->external_ = h;
  cell->handles_ = 1;
  return h;
}

void Pool::on_last_handle(Cell& cell) {
  if (trace_) trace_->release(cell);
  if (config_.retain_released) retained_.push_back(cell.shared_from_this());
  if (cell.pins_ > 0) return;
  const bool recomputable = cell.replayable();
  switch (config_.policy) {
    case DeallocPolicy::Ignore:
      break;
    case DeallocPolicy::Banish:
      // Banishing is safe only when no evicted dependent still needs this value.
      if (!std::any_of(cell.dependents_.begin(), cell.dependents_.end(), [](const auto& w) {
            auto d = w.lock();
            return d && !d->resident() && d->replayable();
          })) {
        banish(cell);
        break;
      }
      [[fallthrough]];
    case DeallocPolicy::EagerEvict:
      if (cell.resident() && recomputable) {
        free_buffer(cell, CellState::Evicted);
        // Unbudgeted, nothing reads e* yet: set_budget builds the classes when it is needed.
        if (config_.budget) {
          OwnWorkTimer timer{total_.bookkeeping_seconds, timing_own_work_};
          Heuristics::on_evicted(*this, cell);
        }
      } else if (cell.has_value() &&
                 (!cell.has_live_dependents() || freeze_readers(cell, /*or_equal=*/true))) {
        // A constant nobody can read again, or one whose readers are resident and no larger:
        // they stay (frozen) instead.  A gradient the engine let go after its first use (batch
        // norm's input gradient, read by the ReLU mask's call) is the common case.
        free_buffer(cell, CellState::Banished);
      }
      break;
  }
}

void Pool::on_cell_created(Cell& cell) {
  cell.cell_index_ = cells_.size();
  cells_.push_back(&cell);
}

void Pool::on_cell_destroyed(Cell& cell) {
  if (cell.has_value()) free_buffer(cell, CellState::Banished);
  remove_candidate(cell);
  update_swappable(cell);  // no longer resident: off the list
  Cell* last = cells_.back();
  cells_[cell.cell_index_] = last;
  last->cell_index_ = cell.cell_index_;
  cells_.pop_back();
}

UnevictableBytes Pool::unevictable_bytes() const {
  UnevictableBytes u;
  for (const Cell* c : cells_) {
    if (!c->resident()) continue;
    if (c->pins_ > 0) {
      u.pinned += c->nbytes_;
      continue;
    }
    if (c->candidate_index_ != std::numeric_limits<std::size_t>::max()) continue;  // evictable
    switch (c->role_) {
      case StorageRole::Parameter:
        u.parameters += c->nbytes_;
        break;
      case StorageRole::Gradient:
        u.gradients += c->nbytes_;
        break;
      case StorageRole::EngineGradient:
        u.engine_gradients += c->nbytes_;
        break;
      case StorageRole::OptimizerState:
        u.optimizer_state += c->nbytes_;
        break;
      case StorageRole::Other:
        u.constants += c->nbytes_;
        break;
    }
  }
  u.cached = allocator_.cached_bytes();
  return u;
}

// ---------------------------------------------------------------- timeline

void Pool::start_timeline() {
  timeline_.clear();
  timeline_base_ = total_;
  timeline_on_ = true;
}

std::vector<TimelineSample> Pool::stop_timeline() {
  timeline_on_ = false;
  return std::exchange(timeline_, {});
}

// Out of line and rarely taken: the call paths only test timeline_on_.
[[gnu::noinline, gnu::cold]] void Pool::sample_timeline(const Producer* producer) {
  TimelineSample s;
  s.call = timeline_.size();
  if (producer) s.op = producer->name();
  s.resident_bytes = resident_bytes_;
  s.cached_bytes = allocator_.cached_bytes();
  s.evictions = total_.evictions - timeline_base_.evictions;
  s.rematerializations = total_.rematerializations - timeline_base_.rematerializations;
  timeline_.push_back(std::move(s));
}

// ---------------------------------------------------------------- trace

void Pool::start_trace(const std::string& path) {
  trace_ = std::make_unique<Trace>(path);
}
void Pool::stop_trace() {
  trace_.reset();
}
void Pool::annotate(std::string_view text) {
  if (trace_) trace_->annotate(text);
}

}  // namespace remat
