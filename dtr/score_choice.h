// Internal: dtr-next's choice, step by step, among three scores: Belady's rule on the last
// step's uses (c / (m·d)), the same with distances past 64 calls damped (c / (m·64·√(d/64)),
// Heuristics::time_term), and dtr-eq's.  None wins everywhere (on the prototype's logs the
// first recomputes 67% less than dtr-eq on the LSTM at 0.3 of the peak but 11% more on
// DenseNet-121 at 0.5; the damped one recomputes 24% less than the first on DenseNet-121 at
// 0.4 but 28% more at 0.3), and a training step that repeats the last one tells which does
// better here: each score gets one trial step under the budget, then the one that recomputed
// least keeps the steps, and each other one is tried again once kRetrySteps steps have passed
// since its last trial (kernel times, and so the costs, drift).  Only a step that followed the
// last one's calls to its end is compared.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <optional>

namespace remat {

class ScoreChoice {
 public:
  // In trial order; a tie goes to the earlier one.
  enum Score : std::uint8_t { Next = 0, Damped = 1, Eq = 2 };
  static constexpr std::size_t kScores = 3;
  static constexpr std::uint64_t kRetrySteps = 32;

  Score score() const { return score_; }
  // The step just ended: under `budget`, recomputing `cost` (in the cost model's units), and
  // whether it followed the last step's calls to the end.  A step that failed (the simulator's
  // thrash limit) passes infinity.  Picks the score of the next step.
  void end_step(std::optional<std::size_t> budget, bool comparable, double cost) {
    ++steps_;
    if (budget != budget_) {
      trials_ = {};
      budget_ = budget;
    }
    if (!budget || !comparable) {
      score_ = Next;  // nothing to compare: a diverged step scores as dtr-eq anyway
      return;
    }
    trials_[score_] = Trial{cost, steps_};
    for (std::size_t s = 0; s < kScores; ++s) {
      if (!trials_[s].cost) {
        score_ = static_cast<Score>(s);
        return;
      }
    }
    std::size_t best = 0;
    for (std::size_t s = 1; s < kScores; ++s)
      if (*trials_[s].cost < *trials_[best].cost) best = s;
    // The other score tried longest ago, if its retry is due.
    std::size_t stalest = best;
    for (std::size_t s = 0; s < kScores; ++s)
      if (s != best && (stalest == best || trials_[s].step < trials_[stalest].step)) stalest = s;
    score_ = static_cast<Score>(steps_ - trials_[stalest].step >= kRetrySteps ? stalest : best);
  }
  // Whether every score has had a trial step under the current budget.
  bool settled() const {
    for (const Trial& t : trials_)
      if (!t.cost) return false;
    return true;
  }

 private:
  struct Trial {
    std::optional<double> cost;
    std::uint64_t step = 0;
  };
  std::array<Trial, kScores> trials_{};
  std::optional<std::size_t> budget_;
  std::uint64_t steps_ = 0;
  Score score_ = Next;
};

}  // namespace remat
