// Internal: dtr-next's choice, step by step, among five scores: Belady's rule on the last
// step's uses (c / (m·d)), the same with distances past 64 calls damped (c / (m·64·√(d/64)),
// Heuristics::time_term), dtr-eq's, Belady's rule capped at 64 calls (c / (m·min(d, 64)):
// within 64 calls the nearer use is kept, past them cost per byte alone decides), and msps's
// ((c0 + the evicted ancestors' cost) / m: no time at all).  None wins everywhere (on the
// prototype's logs the first recomputes 67% less than dtr-eq on the LSTM at 0.3 of the peak but
// 11% more on DenseNet-121 at 0.5; the damped one recomputes 24% less than the first on
// DenseNet-121 at 0.4 but 28% more at 0.3; the capped one, against the best of the other three,
// 24% less on the Transformer at 0.2 and 22% on the LSTM at 0.4, but 14% more on the LSTM at
// 0.3; with msps's added, dtr-next recomputes 16% less on DenseNet-121 at 0.6 and 10% less on
// the LSTM at 0.5, means of 5 seeds, where staleness and distances mislead: the values needed
// last are not always the cheapest to rebuild per byte), and a training step that repeats the last
// one tells which does better here: each score gets one trial step under the budget, then the
// one whose step cost least keeps the steps.  The others are retried one at a time, the one
// tried longest ago first, at most one every kRetrySteps steps (kernel times, and so the costs,
// drift; a retry of each loser every kRetrySteps steps had spent 7 of every 33 steps of a long
// run on them).  Only a step that followed the last one's calls to its end is compared.
// Where searches are priced (the pool's cost model in seconds, its sample not fixed by the
// configuration) the score whose full-sample trial cost least is also tried with a small
// sample, kSmallSample cells drawn per search: a step's cost is then what it recomputed plus its
// searches' draws at a nominal price (Pool::kSecondsPerDraw).  Where values are evicted often
// between cheap ops the full sample's draws cost more than the better victims save (the
// prototype's TreeLSTM log at 0.3 of its peak: 6.7% of the step searching, to recompute 0.2% of
// the step less), and elsewhere they do not (DenseNet-121's at 0.3: 47% more recomputation with
// the small sample).  Only the best score's small sample is tried: every trial of a poor option
// is a step that recomputes more, and the sample matters about as much whatever the score.  An
// option that recomputed more than dtr-eq's trial with the full sample is not kept, however
// cheap its searches: dtr-next recomputes no more than dtr-eq, and on a GPU the searches run on
// the host, beside the kernels, where they may cost nothing.
// Steps that did not follow the last one (a dynamic model's, a different tree every step) score
// as dtr-eq and compare only the two samples, each step's cost taken per second of its original
// calls' kernel time, since the steps differ: the full sample first, then the small one, then
// the cheaper, the other retried after kRetrySteps.  There no step can be replayed under both,
// and the small sample is kept when it costs less in all, though it may recompute more (our
// TreeLSTM's trace, kernels of 1.7 us on average: with 32 draws the same recomputation at 0.3
// of its peak and half the search time).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

namespace remat {

class ScoreChoice {
 public:
  // In trial order; a tie goes to the earlier one.
  enum Score : std::uint8_t { Next = 0, Damped = 1, Eq = 2, Capped = 3, Msps = 4 };
  static constexpr std::size_t kScores = 5;
  // The options: each score with the full sample, then (where searches are priced) each with
  // the small one.  Of the small-sample options only the one with the score whose full-sample
  // trial cost least is tried (the sample and the score are chosen nearly independently, and
  // every trial of a poor option is a step that recomputes more).
  static constexpr std::size_t kOptions = 2 * kScores;
  static constexpr std::size_t kSmallSample = 32;
  static constexpr std::uint64_t kRetrySteps = 32;

  explicit ScoreChoice(bool small_samples = false) : small_samples_(small_samples) {}

  Score score() const { return static_cast<Score>(option_ % kScores); }
  // Whether searches draw kSmallSample cells (at most) in place of the pool's full sample.
  bool small_sample() const { return option_ >= kScores; }
  std::size_t options() const { return small_samples_ ? kOptions : kScores; }
  // The step just ended: under `budget`, recomputing `recompute` and searching for `searches`
  // (both in the cost model's units), and whether it followed the last step's calls to the
  // end; `compute`, its original calls' kernel seconds, weighs a step that did not.  A step
  // that failed (the simulator's thrash limit) passes an infinite recompute.  Picks the option
  // of the next step.
  void end_step(std::optional<std::size_t> budget, bool comparable, double recompute,
                double searches = 0, double compute = 0) {
    ++steps_;
    if (budget != budget_) {
      trials_ = {};
      diverged_ = {};
      budget_ = budget;
    }
    if (!budget) {
      option_ = 0;
      return;
    }
    if (!comparable) {
      option_ = diverged_option(recompute + searches, compute);
      return;
    }
    trials_[option_] = Trial{recompute + searches, recompute, steps_};
    for (std::size_t o = 0; o < options(); ++o) {
      if (!trials_[o].cost && to_try(o)) {
        option_ = o;
        return;
      }
    }
    const double most = trials_[Eq].recompute;  // dtr-eq's, with the full sample
    std::size_t best = Eq;
    for (std::size_t o = 0; o < options(); ++o)
      if (trials_[o].cost && trials_[o].recompute <= most &&
          (*trials_[o].cost < *trials_[best].cost ||
           (*trials_[o].cost == *trials_[best].cost && o < best)))
        best = o;
    // One retry every kRetrySteps steps at most: the other option tried longest ago.
    std::size_t stalest = best;
    std::uint64_t last_retry = 0;
    for (std::size_t o = 0; o < options(); ++o) {
      if (o == best || !trials_[o].cost) continue;
      last_retry = std::max(last_retry, trials_[o].step);
      if (stalest == best || trials_[o].step < trials_[stalest].step) stalest = o;
    }
    option_ = steps_ - last_retry >= kRetrySteps ? stalest : best;
  }
  // Whether every option to try has had a trial step under the current budget.
  bool settled() const {
    for (std::size_t o = 0; o < options(); ++o)
      if (!trials_[o].cost && to_try(o)) return false;
    return true;
  }

 private:
  // After a step that did not follow the last one (scored as dtr-eq whatever the option):
  // dtr-next's option with the sample chosen for such steps.
  std::size_t diverged_option(double cost, double compute) {
    if (!small_samples_ || !(compute > 0)) return Next;
    diverged_[small_sample() ? 1 : 0] = Trial{cost / compute, 0, steps_};
    if (!diverged_[0].cost) return Next;
    if (!diverged_[1].cost) return kScores + Next;
    const std::size_t best = *diverged_[1].cost < *diverged_[0].cost ? 1 : 0;
    const std::size_t other = 1 - best;
    const std::size_t pick = steps_ - diverged_[other].step >= kRetrySteps ? other : best;
    return (pick == 1 ? kScores : 0) + Next;
  }

  // Whether option `o` is one to try: every score with the full sample, and once those have
  // had their trials, the small sample with the score whose full-sample trial cost least (a
  // retry that changes that score brings its small-sample option in).
  bool to_try(std::size_t o) const {
    if (o < kScores) return true;
    std::size_t best = 0;
    for (std::size_t f = 0; f < kScores; ++f) {
      if (!trials_[f].cost) return false;
      if (*trials_[f].cost < *trials_[best].cost) best = f;
    }
    return o == kScores + best;
  }

  struct Trial {
    std::optional<double> cost;  // recomputation and searches
    double recompute = 0;
    std::uint64_t step = 0;
  };
  std::array<Trial, kOptions> trials_{};
  // The full sample's and the small one's on steps that did not follow the last one: their cost
  // per second of the step's original calls.
  std::array<Trial, 2> diverged_{};
  std::optional<std::size_t> budget_;
  std::uint64_t steps_ = 0;
  std::size_t option_ = 0;
  bool small_samples_;
};

}  // namespace remat
