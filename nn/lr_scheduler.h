// Learning-rate schedules as torch.optim.lr_scheduler (PyTorch 1.13): StepLR, CosineAnnealingLR,
// LinearLR (linear warm-up) and SequentialLR to hand over from one to the next.  Constructing one
// sets the optimizer's lr for epoch 0; step() after each epoch (or iteration) moves it on.
// Usage: auto sched = nn::warmup_cosine(opt, /*warmup_steps=*/5, /*start_factor=*/0.1,
// /*T_max=*/95);
//        for (...) { train_one_epoch(); opt.step(); sched->step(); }
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nn/optim.h"

namespace remat::nn {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one epoch and writes the new learning rate into every group of the optimizer.
  virtual void step();
  // The learning rates of the last step (one per group), as the optimizer now holds them.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  std::int64_t last_epoch() const { return last_epoch_; }
  // The groups' initial learning rates the schedule is defined from.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return optimizer_; }

 protected:
  // Records each group's initial lr in the optimizer (if no scheduler did before) as base.
  // Derived constructors call initial_step() once their members are set.
  explicit LRScheduler(Optimizer& optimizer);
  void initial_step();
  // The lr of epoch last_epoch_ (already advanced), computed from the groups' current lr as
  // PyTorch's chainable get_lr() does, so rounding matches PyTorch step by step.
  virtual std::vector<double> get_lr() = 0;
  // The lr of epoch last_epoch_ in closed form, as PyTorch's step(epoch) uses it.
  virtual std::vector<double> closed_form_lr() const = 0;
  std::vector<double> current_lrs() const;

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::int64_t last_epoch_ = -1;

 private:
  friend class SequentialLR;
  void apply(const std::vector<double>& lrs);
  void step_to(std::int64_t epoch);  // PyTorch's step(epoch): jump to epoch in closed form
  std::vector<double> last_lr_;
};

// lr = base_lr * gamma^(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed recursively
// as PyTorch does (so past T_max it rises again, with period 2 * T_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min = 0);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() const override;

 private:
  std::int64_t t_max_;
  double eta_min_;
};

// Scales lr linearly from start_factor * base_lr to end_factor * base_lr over total_iters steps,
// then holds it: a linear warm-up (torch.optim.lr_scheduler.LinearLR).
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           std::int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() const override;

 private:
  double start_factor_;
  double end_factor_;
  std::int64_t total_iters_;
};
using LinearWarmup = LinearLR;

// Runs schedulers[0] until epoch milestones[0], then schedulers[1] (restarted at its epoch 0)
// until milestones[1], and so on (torch.optim.lr_scheduler.SequentialLR).  All schedulers must
// drive the same optimizer; create them just before the SequentialLR, as in PyTorch.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<std::int64_t> milestones);
  void step() override;

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() const override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

// Linear warm-up from start_factor * lr over warmup_steps steps, then cosine annealing to
// eta_min over T_max steps: SequentialLR(LinearLR, CosineAnnealingLR) with milestone warmup_steps.
// warmup_steps == 0 gives the cosine schedule alone.
std::shared_ptr<SequentialLR> warmup_cosine(Optimizer& optimizer, std::int64_t warmup_steps,
                                            double start_factor, std::int64_t T_max,
                                            double eta_min = 0);

}  // namespace remat::nn
