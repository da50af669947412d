// Optimizers as in PyTorch 1.13 (SGD, Adam, AdamW): parameter groups with per-group options,
// step() updating parameters in place under NoGradGuard, zero_grad(), per-parameter state.
// Usage: nn::Adam opt(model->parameters(), {.lr = 1e-3, .betas = {0.9, 0.99}});
//        backward(loss); opt.step(); opt.zero_grad();
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace remat::nn {

// What an optimizer keeps for one parameter once it has been updated: the number of updates
// and named buffers ("momentum_buffer"; "exp_avg", "exp_avg_sq", "max_exp_avg_sq").
struct ParamState {
  std::int64_t step = 0;
  std::map<std::string, Tensor> buffers;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string_view name() const = 0;  // "SGD", "Adam", "AdamW"

  // One update of every parameter that has a gradient; parameters without one are skipped
  // (their state is not created or advanced).
  void step();
  // Drops every parameter's gradient (PyTorch's set_to_none=True), or zeroes it in place.
  void zero_grad(bool set_to_none = true);

  std::size_t num_param_groups() const { return groups_.size(); }
  const std::vector<Tensor>& params(std::size_t group) const;
  std::size_t num_params() const;  // over all groups

  // Learning rate per group (what schedulers read and write).
  virtual double lr(std::size_t group = 0) const = 0;
  virtual void set_lr(std::size_t group, double lr) = 0;
  void set_lr(double lr);  // every group
  // The lr schedules start from (PyTorch's group['initial_lr']): set by the first scheduler
  // attached to the optimizer, so a second scheduler sees the same base.
  std::optional<double> initial_lr(std::size_t group) const;
  void set_initial_lr(std::size_t group, double lr);

  // A group's hyper-parameters by name ("lr", "momentum", "beta1", "amsgrad" as 0/1, ...).
  virtual std::map<std::string, double> hyperparameters(std::size_t group) const = 0;

  // The state of parameter `index` of `group`; nullptr before its first update.
  const ParamState* state(std::size_t group, std::size_t index) const;

  // The whole optimizer as named tensors, as PyTorch's state_dict, with parameters numbered
  // across groups in order:
  //   "optimizer.<name>"          int64 0-dim, layout version (1)
  //   "param_groups.<g>.params"   int64 1-D, the numbers of the group's parameters
  //   "param_groups.<g>.<hyper>"  float64 0-dim, each hyper-parameter (and "initial_lr" if set)
  //   "state.<n>.step"            int64 0-dim, for each parameter with state
  //   "state.<n>.<buffer>"        the buffer, shaped as the parameter
  std::map<std::string, Tensor> state_dict() const;
  // Restores what state_dict() returned, for an optimizer of the same type over parameters of
  // the same shapes.  Validates everything first: on error it throws remat::Error naming the
  // entry and the problem and leaves the optimizer unchanged.  State tensors are copied.
  void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  Optimizer() = default;
  // Adds a group after checking its tensors: defined, floating point, leaves, in no group yet.
  void add_group(std::vector<Tensor> params);
  // Applies one update; grad is defined and has param's shape.  Runs under NoGradGuard.
  virtual void update(std::size_t group, const Tensor& param, const Tensor& grad, ParamState& state) = 0;
  // Validates hyper-parameters given by name (all of them, as hyperparameters() lists) and,
  // unless check_only, installs them for `group`.  Throws remat::Error on a bad value.
  virtual void set_hyperparameters(std::size_t group, const std::map<std::string, double>& values,
                                   bool check_only) = 0;
  // Which state buffers a parameter with state must have, and which it may have.
  struct StateSpec {
    std::vector<std::string> required;
    std::vector<std::string> optional;
  };
  virtual StateSpec state_spec() const = 0;

 private:
  struct Group {
    std::vector<Tensor> params;
    std::vector<std::optional<ParamState>> state;
    std::optional<double> initial_lr;
  };
  std::vector<Group> groups_;
};

// Per-group options and the typed access every concrete optimizer shares.
template <class Options>
class OptimizerWithOptions : public Optimizer {
 public:
  const Options& options(std::size_t group = 0) const;
  // Replaces a group's options after validating them.
  void set_options(std::size_t group, const Options& options);
  void add_param_group(std::vector<Tensor> params, const Options& options);

  double lr(std::size_t group = 0) const override { return options(group).lr; }
  void set_lr(std::size_t group, double lr) override;
  using Optimizer::set_lr;

 protected:
  std::vector<Options> options_;
};

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// Stochastic gradient descent with optional momentum, dampening, Nesterov momentum and L2
// weight decay, exactly as torch.optim.SGD (the momentum buffer starts as the first gradient).
class SGD : public OptimizerWithOptions<SGDOptions> {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options = {});
  std::string_view name() const override { return "SGD"; }
  std::map<std::string, double> hyperparameters(std::size_t group) const override;

 protected:
  void update(std::size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  void set_hyperparameters(std::size_t group, const std::map<std::string, double>& values,
                           bool check_only) override;
  StateSpec state_spec() const override { return {{}, {"momentum_buffer"}}; }
};

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;  // L2 penalty added to the gradient
  bool amsgrad = false;
};

// Adam (Kingma & Ba) with optional AMSGrad, exactly as torch.optim.Adam (single-tensor path).
class Adam : public OptimizerWithOptions<AdamOptions> {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  std::string_view name() const override { return "Adam"; }
  std::map<std::string, double> hyperparameters(std::size_t group) const override;

 protected:
  void update(std::size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  void set_hyperparameters(std::size_t group, const std::map<std::string, double>& values,
                           bool check_only) override;
  StateSpec state_spec() const override { return {{"exp_avg", "exp_avg_sq"}, {"max_exp_avg_sq"}}; }
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: param *= 1 - lr * weight_decay
  bool amsgrad = false;
};

// Adam with decoupled weight decay (Loshchilov & Hutter), exactly as torch.optim.AdamW.
class AdamW : public OptimizerWithOptions<AdamWOptions> {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = {});
  std::string_view name() const override { return "AdamW"; }
  std::map<std::string, double> hyperparameters(std::size_t group) const override;

 protected:
  void update(std::size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  void set_hyperparameters(std::size_t group, const std::map<std::string, double>& values,
                           bool check_only) override;
  StateSpec state_spec() const override { return {{"exp_avg", "exp_avg_sq"}, {"max_exp_avg_sq"}}; }
};

// Throws remat::Error naming the optimizer and the bad value.
void validate(const SGDOptions& options);
void validate(const AdamOptions& options);
void validate(const AdamWOptions& options);

extern template class OptimizerWithOptions<SGDOptions>;
extern template class OptimizerWithOptions<AdamOptions>;
extern template class OptimizerWithOptions<AdamWOptions>;

}  // namespace remat::nn
