// Internal: dtr-next's choice, step by step, between its own score (Belady's rule on the last
// step's uses) and dtr-eq's.  Neither wins everywhere (on the prototype's logs dtr-next
// recomputes 67% less than dtr-eq on the LSTM at 0.3 of the peak but 11% more on DenseNet-121
// at 0.5), and a training step that repeats the last one tells which does better here: each
// score gets one trial step under the budget, then the one that recomputed less keeps the
// steps, and the other is tried again once kRetrySteps steps have passed since its last trial
// (kernel times, and so the costs, drift).  Only a step that followed the last one's calls to its
// end is compared.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <optional>

namespace remat {

class ScoreChoice {
 public:
  enum Score : std::uint8_t { Next = 0, Eq = 1 };
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
    for (Score s : {Next, Eq}) {
      if (!trials_[s].cost) {
        score_ = s;
        return;
      }
    }
    const Score best = *trials_[Eq].cost < *trials_[Next].cost ? Eq : Next;
    const Score other = best == Next ? Eq : Next;
    score_ = steps_ - trials_[other].step >= kRetrySteps ? other : best;
  }
  // Whether both scores have had a trial step under the current budget.
  bool settled() const { return trials_[Next].cost && trials_[Eq].cost; }

 private:
  struct Trial {
    std::optional<double> cost;
    std::uint64_t step = 0;
  };
  std::array<Trial, 2> trials_{};
  std::optional<std::size_t> budget_;
  std::uint64_t steps_ = 0;
  Score score_ = Next;
};

}  // namespace remat
