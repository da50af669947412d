#include "nn/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace remat::nn {

// The formulas below are torch/optim/lr_scheduler.py's, written in the same order of
// operations so that the doubles agree with PyTorch's step by step.

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (std::size_t g = 0; g < optimizer.num_param_groups(); ++g) {
    if (!optimizer.initial_lr(g)) optimizer.set_initial_lr(g, optimizer.lr(g));
    base_lrs_.push_back(*optimizer.initial_lr(g));
  }
}

void LRScheduler::initial_step() {
  step();
}

void LRScheduler::step() {
  ++last_epoch_;
  apply(get_lr());
}

void LRScheduler::step_to(std::int64_t epoch) {
  last_epoch_ = epoch;
  apply(closed_form_lr());
}

void LRScheduler::apply(const std::vector<double>& lrs) {
  for (std::size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(g, lrs[g]);
  last_lr_ = current_lrs();
}

std::vector<double> LRScheduler::current_lrs() const {
  std::vector<double> lrs;
  for (std::size_t g = 0; g < optimizer_.num_param_groups(); ++g) lrs.push_back(optimizer_.lr(g));
  return lrs;
}

// --------------------------------------------------------------------------------------- StepLR

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  REMAT_CHECK(step_size >= 1, "StepLR: step_size must be >= 1, got {}", step_size);
  REMAT_CHECK(gamma >= 0 && std::isfinite(gamma), "StepLR: gamma must be >= 0, got {}", gamma);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  auto lrs = current_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::vector<double> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)));
  return lrs;
}

// ---------------------------------------------------------------------------- CosineAnnealingLR

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  REMAT_CHECK(T_max >= 1, "CosineAnnealingLR: T_max must be >= 1, got {}", T_max);
  REMAT_CHECK(eta_min >= 0 && std::isfinite(eta_min),
              "CosineAnnealingLR: eta_min must be >= 0, got {}", eta_min);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  constexpr double pi = std::numbers::pi;
  const double e = static_cast<double>(last_epoch_);
  const double T = static_cast<double>(t_max_);
  auto lrs = current_lrs();
  if (last_epoch_ == 0) return lrs;
  if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0) {
    for (std::size_t g = 0; g < lrs.size(); ++g)
      lrs[g] = lrs[g] + (base_lrs_[g] - eta_min_) * (1 - std::cos(pi / T)) / 2;
    return lrs;
  }
  for (double& lr : lrs)
    lr = (1 + std::cos(pi * e / T)) / (1 + std::cos(pi * (e - 1) / T)) * (lr - eta_min_) + eta_min_;
  return lrs;
}

std::vector<double> CosineAnnealingLR::closed_form_lr() const {
  constexpr double pi = std::numbers::pi;
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(eta_min_ + (base - eta_min_) *
                                 (1 + std::cos(pi * static_cast<double>(last_epoch_) /
                                               static_cast<double>(t_max_))) /
                                 2);
  return lrs;
}

// ------------------------------------------------------------------------------------- LinearLR

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   std::int64_t total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  // PyTorch allows start_factor = 0 and then divides by zero on the first step.
  REMAT_CHECK(start_factor > 0 && start_factor <= 1,
              "LinearLR: start_factor must be in (0, 1], got {}", start_factor);
  REMAT_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: end_factor must be in [0, 1], got {}",
              end_factor);
  REMAT_CHECK(total_iters >= 1, "LinearLR: total_iters must be >= 1, got {}", total_iters);
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  auto lrs = current_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double delta = end_factor_ - start_factor_;
  for (double& lr : lrs)
    lr = lr * (1. + delta / (static_cast<double>(total_iters_) * start_factor_ +
                             static_cast<double>(last_epoch_ - 1) * delta));
  return lrs;
}

std::vector<double> LinearLR::closed_form_lr() const {
  std::vector<double> lrs;
  const double progress = static_cast<double>(std::min(total_iters_, last_epoch_));
  for (double base : base_lrs_)
    lrs.push_back(base * (start_factor_ + (end_factor_ - start_factor_) * progress /
                                              static_cast<double>(total_iters_)));
  return lrs;
}

// --------------------------------------------------------------------------------- SequentialLR

SequentialLR::SequentialLR(Optimizer& optimizer,
                           std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<std::int64_t> milestones)
    : LRScheduler(optimizer),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  REMAT_CHECK(!schedulers_.empty(), "SequentialLR: needs at least one scheduler");
  REMAT_CHECK(milestones_.size() + 1 == schedulers_.size(),
              "SequentialLR: expects one milestone fewer than schedulers, got {} schedulers and {} "
              "milestones",
              schedulers_.size(), milestones_.size());
  for (std::size_t i = 0; i < schedulers_.size(); ++i) {
    REMAT_CHECK(schedulers_[i] != nullptr, "SequentialLR: scheduler {} is null", i);
    REMAT_CHECK(&schedulers_[i]->optimizer() == &optimizer,
                "SequentialLR: scheduler {} drives a different optimizer than the one given", i);
    REMAT_CHECK(dynamic_cast<SequentialLR*>(schedulers_[i].get()) == nullptr,
                "SequentialLR: scheduler {} is itself a SequentialLR, which cannot be nested", i);
  }
  for (std::size_t i = 0; i < milestones_.size(); ++i)
    REMAT_CHECK(milestones_[i] >= 1 && (i == 0 || milestones_[i] > milestones_[i - 1]),
                "SequentialLR: milestones must be positive and increasing, got {}", milestones_);

  // As PyTorch: undo the initial steps the schedulers took when they were built, then take the
  // first scheduler's initial step alone.
  last_epoch_ = 0;
  for (std::size_t g = 0; g < optimizer.num_param_groups(); ++g)
    optimizer.set_lr(g, *optimizer.initial_lr(g));
  for (auto& s : schedulers_) --s->last_epoch_;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  ++last_epoch_;
  const auto idx = static_cast<std::size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler& active = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_)
    active.step_to(0);
  else
    active.step();
  last_lr_ = active.get_last_lr();
}

// SequentialLR's step() delegates to the active scheduler; the lr it holds is whatever that
// scheduler set.
std::vector<double> SequentialLR::get_lr() {
  return current_lrs();
}

std::vector<double> SequentialLR::closed_form_lr() const {
  REMAT_THROW("SequentialLR: cannot jump to an epoch in closed form");
}

std::shared_ptr<SequentialLR> warmup_cosine(Optimizer& optimizer, std::int64_t warmup_steps,
                                            double start_factor, std::int64_t T_max,
                                            double eta_min) {
  REMAT_CHECK(warmup_steps >= 0, "warmup_cosine: warmup_steps must be >= 0, got {}", warmup_steps);
  auto cosine = std::make_shared<CosineAnnealingLR>(optimizer, T_max, eta_min);
  // No warm-up: the cosine schedule alone, still behind a SequentialLR so the type is one.
  if (warmup_steps == 0)
    return std::make_shared<SequentialLR>(
        optimizer, std::vector<std::shared_ptr<LRScheduler>>{cosine}, std::vector<std::int64_t>{});
  auto warmup = std::make_shared<LinearLR>(optimizer, start_factor, 1.0, warmup_steps);
  return std::make_shared<SequentialLR>(optimizer,
                                        std::vector<std::shared_ptr<LRScheduler>>{warmup, cosine},
                                        std::vector<std::int64_t>{warmup_steps});
}

}  // namespace remat::nn
