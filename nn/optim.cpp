#include "nn/optim.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "autograd/grad_mode.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/inplace.h"
#include "ops/optimizer_step.h"
#include "ops/view.h"

namespace remat::nn {
namespace {

// a + alpha * b in one rounding per element, as torch's add(a, b, alpha=...): a fresh tensor.
Tensor add_scaled(const Tensor& a, const Tensor& b, double alpha) {
  Tensor out = clone(a);
  add_(out, b, alpha);
  return out;
}

bool parse_index(std::string_view s, std::size_t& out) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// Splits "prefix.<index>.<rest>" (rest may contain dots); false when it does not have that form.
bool split_indexed(std::string_view key, std::string_view prefix, std::size_t& index,
                   std::string& rest) {
  if (key.substr(0, prefix.size()) != prefix) return false;
  key.remove_prefix(prefix.size());
  const auto dot = key.find('.');
  if (dot == std::string_view::npos || !parse_index(key.substr(0, dot), index)) return false;
  rest = std::string(key.substr(dot + 1));
  return !rest.empty();
}

bool is_scalar_of(const Tensor& t, DType dtype) {
  return t.defined() && t.dtype() == dtype && t.dim() == 0;
}

void check_flag(std::string_view who, const std::map<std::string, double>& v,
                const std::string& key) {
  const double x = v.at(key);
  REMAT_CHECK(x == 0 || x == 1, "{}: {} must be 0 or 1 (a flag), got {}", who, key, x);
}

// The Adam update shared by Adam and AdamW (torch.optim.adam._single_tensor_adam and
// adamw._single_tensor_adamw in PyTorch 1.13).
void adam_update(const Tensor& param, const Tensor& grad_in, ParamState& state, double lr,
                 double beta1, double beta2, double eps, double weight_decay, bool amsgrad,
                 bool decoupled) {
  auto& buf = state.buffers;
  if (!buf.count("exp_avg")) buf["exp_avg"] = zeros_like(param);
  if (!buf.count("exp_avg_sq")) buf["exp_avg_sq"] = zeros_like(param);
  if (amsgrad && !buf.count("max_exp_avg_sq")) buf["max_exp_avg_sq"] = zeros_like(param);
  const Tensor max_sq = amsgrad ? buf["max_exp_avg_sq"] : Tensor();
  if (fused_step_applies({param, grad_in, buf["exp_avg"], buf["exp_avg_sq"], max_sq})) {
    adam_step_(param, buf["exp_avg"], buf["exp_avg_sq"], max_sq, grad_in,
               {.lr = lr,
                .beta1 = beta1,
                .beta2 = beta2,
                .eps = eps,
                .weight_decay = weight_decay,
                .decoupled = decoupled,
                .step = state.step});
    return;
  }
  // The same arithmetic as a chain of in-place ops, for strided tensors.
  Tensor grad = grad_in;
  if (decoupled) {
    mul_(param, 1 - lr * weight_decay);
  } else if (weight_decay != 0) {
    grad = add_scaled(grad_in, param, weight_decay);
  }
  const Tensor& exp_avg = buf["exp_avg"];
  const Tensor& exp_avg_sq = buf["exp_avg_sq"];

  mul_(exp_avg, beta1);
  add_(exp_avg, grad, 1 - beta1);
  mul_(exp_avg_sq, beta2);
  addcmul_(exp_avg_sq, grad, grad, 1 - beta2);

  const double step = static_cast<double>(state.step);
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  Tensor denom;
  if (amsgrad) {
    const Tensor& max_sq = buf["max_exp_avg_sq"];
    copy_(max_sq, maximum(max_sq, exp_avg_sq));
    denom = div(sqrt(max_sq), bias_correction2_sqrt);
  } else {
    denom = div(sqrt(exp_avg_sq), bias_correction2_sqrt);
  }
  add_(denom, eps);
  addcdiv_(param, exp_avg, denom, -step_size);
}

template <class O>
std::map<std::string, double> adam_hyperparameters(const O& o) {
  return {{"lr", o.lr},   {"beta1", o.betas.first},         {"beta2", o.betas.second},
          {"eps", o.eps}, {"weight_decay", o.weight_decay}, {"amsgrad", o.amsgrad ? 1.0 : 0.0}};
}

template <class O>
O adam_options_from(std::string_view who, const std::map<std::string, double>& v) {
  check_flag(who, v, "amsgrad");
  O o;
  o.lr = v.at("lr");
  o.betas = {v.at("beta1"), v.at("beta2")};
  o.eps = v.at("eps");
  o.weight_decay = v.at("weight_decay");
  o.amsgrad = v.at("amsgrad") != 0;
  return o;
}

template <class O>
void validate_adam(std::string_view who, const O& o) {
  REMAT_CHECK(o.lr >= 0 && std::isfinite(o.lr), "{}: invalid learning rate {} (must be >= 0)", who,
              o.lr);
  REMAT_CHECK(o.eps >= 0 && std::isfinite(o.eps), "{}: invalid eps {} (must be >= 0)", who, o.eps);
  REMAT_CHECK(o.betas.first >= 0 && o.betas.first < 1, "{}: invalid beta1 {} (must be in [0, 1))",
              who, o.betas.first);
  REMAT_CHECK(o.betas.second >= 0 && o.betas.second < 1, "{}: invalid beta2 {} (must be in [0, 1))",
              who, o.betas.second);
  REMAT_CHECK(o.weight_decay >= 0 && std::isfinite(o.weight_decay),
              "{}: invalid weight_decay {} (must be >= 0)", who, o.weight_decay);
}

}  // namespace

// ---------------------------------------------------------------------------------- Optimizer

void Optimizer::add_group(std::vector<Tensor> params) {
  REMAT_CHECK(!params.empty(), "{}: got an empty parameter list", name());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    REMAT_CHECK(p.defined(), "{}: parameter {} of the new group is an undefined tensor", name(), i);
    REMAT_CHECK(is_floating(p.dtype()),
                "{}: parameter {} (shape {}) is {}; only floating-point tensors can be optimized",
                name(), i, p.shape(), p.dtype());
    REMAT_CHECK(
        p.is_leaf(),
        "{}: parameter {} (shape {}) is not a leaf tensor; optimize the leaf it was computed from",
        name(), i, p.shape());
    for (std::size_t j = 0; j < i; ++j)
      REMAT_CHECK(!same(params[j], p), "{}: parameter {} appears twice in the group (also at {})",
                  name(), i, j);
    for (std::size_t g = 0; g < groups_.size(); ++g)
      for (const Tensor& q : groups_[g].params)
        REMAT_CHECK(!same(q, p), "{}: parameter {} (shape {}) is already in parameter group {}",
                    name(), i, p.shape(), g);
  }
  Group group;
  group.state.resize(params.size());
  group.params = std::move(params);
  groups_.push_back(std::move(group));
}

void Optimizer::step() {
  NoGradGuard no_grad;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    Group& group = groups_[g];
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      REMAT_CHECK(
          grad.shape() == p.shape() && grad.dtype() == p.dtype(),
          "{}.step: parameter {} of group {} is {} of shape {} but its gradient is {} of shape {}",
          name(), i, g, p.dtype(), p.shape(), grad.dtype(), grad.shape());
      // A failed first update must not leave an empty state behind that reads as "updated".
      ParamState fresh;
      ParamState& state = group.state[i] ? *group.state[i] : fresh;
      ++state.step;
      try {
        update(g, p, grad, state);
      } catch (...) {
        if (group.state[i]) --state.step;
        throw;
      }
      if (!group.state[i]) group.state[i] = std::move(fresh);
      for (auto& [key, t] : group.state[i]->buffers)
        t.storage()->set_role(StorageRole::OptimizerState);
    }
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Group& group : groups_)
    for (const Tensor& p : group.params) {
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none)
        p.set_grad(Tensor());
      else
        zero_(grad);
    }
}

const std::vector<Tensor>& Optimizer::params(std::size_t group) const {
  REMAT_CHECK(group < groups_.size(), "{}: no parameter group {} (the optimizer has {})", name(),
              group, groups_.size());
  return groups_[group].params;
}

std::size_t Optimizer::num_params() const {
  std::size_t n = 0;
  for (const Group& g : groups_) n += g.params.size();
  return n;
}

void Optimizer::set_lr(double lr) {
  for (std::size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
}

std::optional<double> Optimizer::initial_lr(std::size_t group) const {
  params(group);  // range check
  return groups_[group].initial_lr;
}

void Optimizer::set_initial_lr(std::size_t group, double lr) {
  params(group);
  REMAT_CHECK(lr >= 0 && std::isfinite(lr), "{}: invalid initial learning rate {}", name(), lr);
  groups_[group].initial_lr = lr;
}

const ParamState* Optimizer::state(std::size_t group, std::size_t index) const {
  const auto& ps = params(group);
  REMAT_CHECK(index < ps.size(), "{}: group {} has {} parameters, asked for {}", name(), group,
              ps.size(), index);
  const auto& s = groups_[group].state[index];
  return s ? &*s : nullptr;
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out;
  out[fmt::format("optimizer.{}", name())] = scalar_tensor(1, {.dtype = DType::Int64});
  std::int64_t n = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const Group& group = groups_[g];
    const auto count = static_cast<std::int64_t>(group.params.size());
    out[fmt::format("param_groups.{}.params", g)] =
        arange(static_cast<double>(n), static_cast<double>(n + count), 1, {.dtype = DType::Int64});
    for (const auto& [key, value] : hyperparameters(g))
      out[fmt::format("param_groups.{}.{}", g, key)] =
          scalar_tensor(value, {.dtype = DType::Float64});
    if (group.initial_lr)
      out[fmt::format("param_groups.{}.initial_lr", g)] =
          scalar_tensor(*group.initial_lr, {.dtype = DType::Float64});
    for (std::size_t i = 0; i < group.params.size(); ++i, ++n) {
      if (!group.state[i]) continue;
      const ParamState& s = *group.state[i];
      out[fmt::format("state.{}.step", n)] =
          scalar_tensor(static_cast<double>(s.step), {.dtype = DType::Int64});
      for (const auto& [key, t] : s.buffers) out[fmt::format("state.{}.{}", n, key)] = t;
    }
  }
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& sd) {
  const std::string who = fmt::format("{}.load_state_dict", name());
  const std::string header = fmt::format("optimizer.{}", name());

  // Global parameter numbers, as state_dict() assigns them.
  std::vector<std::pair<std::size_t, std::size_t>> where;  // number -> (group, index)
  for (std::size_t g = 0; g < groups_.size(); ++g)
    for (std::size_t i = 0; i < groups_[g].params.size(); ++i) where.emplace_back(g, i);

  // The type first, so that a module's file or another optimizer's says so.
  auto first_header = sd.lower_bound("optimizer.");
  if (first_header == sd.end() || first_header->first.rfind("optimizer.", 0) != 0)
    REMAT_THROW("{}: missing entry '{}': not the state of an optimizer", who, header);

  // Sort the entries by what they describe; anything else is unexpected.
  bool have_header = false;
  std::vector<std::map<std::string, Tensor>> group_entries(groups_.size());
  std::map<std::size_t, std::map<std::string, Tensor>> state_entries;
  for (const auto& [key, t] : sd) {
    std::size_t index = 0;
    std::string rest;
    REMAT_CHECK(t.defined(), "{}: entry '{}' is an undefined tensor", who, key);
    if (key.rfind("optimizer.", 0) == 0) {
      REMAT_CHECK(key == header, "{}: the state is for optimizer '{}', not {}", who, key.substr(10),
                  name());
      REMAT_CHECK(
          is_scalar_of(t, DType::Int64) && t.item<std::int64_t>() == 1,
          "{}: entry '{}' must be an int64 scalar holding layout version 1, got {} of shape {}",
          who, key, t.dtype(), t.shape());
      have_header = true;
    } else if (split_indexed(key, "param_groups.", index, rest)) {
      REMAT_CHECK(index < groups_.size(),
                  "{}: entry '{}' is for parameter group {}, but the optimizer has {} groups", who,
                  key, index, groups_.size());
      group_entries[index][rest] = t;
    } else if (split_indexed(key, "state.", index, rest)) {
      REMAT_CHECK(index < where.size(),
                  "{}: entry '{}' is for parameter {}, but the optimizer has {} parameters", who,
                  key, index, where.size());
      state_entries[index][rest] = t;
    } else {
      REMAT_THROW("{}: unexpected entry '{}'", who, key);
    }
  }
  REMAT_CHECK(have_header, "{}: missing entry '{}'", who, header);

  // Groups: the same parameters, every hyper-parameter, valid values.
  std::vector<std::map<std::string, double>> hyper(groups_.size());
  std::vector<std::optional<double>> initial(groups_.size());
  std::size_t first = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    auto& entries = group_entries[g];
    const std::size_t count = groups_[g].params.size();
    auto pit = entries.find("params");
    REMAT_CHECK(pit != entries.end(), "{}: missing entry 'param_groups.{}.params'", who, g);
    const Tensor& ids = pit->second;
    REMAT_CHECK(ids.dtype() == DType::Int64 && ids.dim() == 1,
                "{}: entry 'param_groups.{}.params' must be a 1-D int64 tensor, got {} of shape {}",
                who, g, ids.dtype(), ids.shape());
    REMAT_CHECK(static_cast<std::size_t>(ids.numel()) == count,
                "{}: parameter group {} has {} parameters in the state but {} in the optimizer",
                who, g, ids.numel(), count);
    const auto values = ids.to_vector<std::int64_t>();
    for (std::size_t i = 0; i < count; ++i)
      REMAT_CHECK(values[i] == static_cast<std::int64_t>(first + i),
                  "{}: parameter group {} lists parameter {} at position {}, expected {}", who, g,
                  values[i], i, first + i);
    first += count;
    entries.erase(pit);

    const auto expected = hyperparameters(g);
    for (const auto& [key, t] : entries) {
      REMAT_CHECK(expected.count(key) || key == "initial_lr",
                  "{}: unexpected entry 'param_groups.{}.{}'", who, g, key);
      REMAT_CHECK(is_scalar_of(t, DType::Float64),
                  "{}: entry 'param_groups.{}.{}' must be a float64 scalar, got {} of shape {}",
                  who, g, key, t.dtype(), t.shape());
      const double v = t.item<double>();
      REMAT_CHECK(std::isfinite(v), "{}: entry 'param_groups.{}.{}' is not finite ({})", who, g,
                  key, v);
      if (key == "initial_lr") {
        REMAT_CHECK(v >= 0, "{}: entry 'param_groups.{}.initial_lr' is negative ({})", who, g, v);
        initial[g] = v;
      } else {
        hyper[g][key] = v;
      }
    }
    for (const auto& [key, unused] : expected)
      REMAT_CHECK(hyper[g].count(key), "{}: missing entry 'param_groups.{}.{}'", who, g, key);
    try {
      set_hyperparameters(g, hyper[g], /*check_only=*/true);
    } catch (const Error& e) {
      REMAT_THROW("{}: parameter group {}: {}", who, g, e.what());
    }
  }

  // Per-parameter state: a step count and the buffers this optimizer keeps, shaped as the
  // parameter.  Copies are made now so that nothing can fail once the optimizer is changed.
  const StateSpec spec = state_spec();
  std::vector<std::vector<std::optional<ParamState>>> new_state(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) new_state[g].resize(groups_[g].params.size());
  {
    NoGradGuard no_grad;
    for (const auto& [n, entries] : state_entries) {
      const auto [g, i] = where[n];
      const Tensor& p = groups_[g].params[i];
      ParamState s;
      auto sit = entries.find("step");
      REMAT_CHECK(sit != entries.end(), "{}: missing entry 'state.{}.step'", who, n);
      REMAT_CHECK(is_scalar_of(sit->second, DType::Int64),
                  "{}: entry 'state.{}.step' must be an int64 scalar, got {} of shape {}", who, n,
                  sit->second.dtype(), sit->second.shape());
      s.step = sit->second.item<std::int64_t>();
      REMAT_CHECK(s.step >= 0, "{}: entry 'state.{}.step' is negative ({})", who, n, s.step);
      for (const auto& [key, t] : entries) {
        if (key == "step") continue;
        const bool known =
            std::find(spec.required.begin(), spec.required.end(), key) != spec.required.end() ||
            std::find(spec.optional.begin(), spec.optional.end(), key) != spec.optional.end();
        REMAT_CHECK(known, "{}: unexpected entry 'state.{}.{}'", who, n, key);
        REMAT_CHECK(t.dtype() == p.dtype() && t.shape() == p.shape(),
                    "{}: entry 'state.{}.{}' is {} of shape {}, but parameter {} (group {}, index "
                    "{}) is {} of shape {}",
                    who, n, key, t.dtype(), t.shape(), n, g, i, p.dtype(), p.shape());
        s.buffers[key] = clone(t);
      }
      for (const auto& key : spec.required)
        REMAT_CHECK(s.buffers.count(key), "{}: missing entry 'state.{}.{}'", who, n, key);
      new_state[g][i] = std::move(s);
    }
  }

  // Everything is valid: install it.
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    set_hyperparameters(g, hyper[g], /*check_only=*/false);
    groups_[g].initial_lr = initial[g];
    groups_[g].state = std::move(new_state[g]);
  }
}

// ----------------------------------------------------------------------- OptimizerWithOptions

template <class Options>
const Options& OptimizerWithOptions<Options>::options(std::size_t group) const {
  params(group);  // range check with a clear message
  return options_[group];
}

template <class Options>
void OptimizerWithOptions<Options>::set_options(std::size_t group, const Options& options) {
  params(group);
  validate(options);
  options_[group] = options;
}

template <class Options>
void OptimizerWithOptions<Options>::add_param_group(std::vector<Tensor> params,
                                                    const Options& options) {
  validate(options);
  add_group(std::move(params));
  options_.push_back(options);
}

template <class Options>
void OptimizerWithOptions<Options>::set_lr(std::size_t group, double lr) {
  Options o = options(group);
  o.lr = lr;
  set_options(group, o);
}

template class OptimizerWithOptions<SGDOptions>;
template class OptimizerWithOptions<AdamOptions>;
template class OptimizerWithOptions<AdamWOptions>;

// ---------------------------------------------------------------------------------------- SGD

void validate(const SGDOptions& o) {
  REMAT_CHECK(o.lr >= 0 && std::isfinite(o.lr), "SGD: invalid learning rate {} (must be >= 0)",
              o.lr);
  REMAT_CHECK(o.momentum >= 0 && std::isfinite(o.momentum),
              "SGD: invalid momentum {} (must be >= 0)", o.momentum);
  REMAT_CHECK(std::isfinite(o.dampening), "SGD: invalid dampening {}", o.dampening);
  REMAT_CHECK(o.weight_decay >= 0 && std::isfinite(o.weight_decay),
              "SGD: invalid weight_decay {} (must be >= 0)", o.weight_decay);
  REMAT_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
              "SGD: Nesterov momentum requires a momentum > 0 and zero dampening (got momentum {}, "
              "dampening {})",
              o.momentum, o.dampening);
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options) {
  add_param_group(std::move(params), options);
}

std::map<std::string, double> SGD::hyperparameters(std::size_t group) const {
  const SGDOptions& o = options(group);
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov ? 1.0 : 0.0}};
}

void SGD::set_hyperparameters(std::size_t group, const std::map<std::string, double>& v,
                              bool check_only) {
  check_flag("SGD", v, "nesterov");
  const SGDOptions o{.lr = v.at("lr"),
                     .momentum = v.at("momentum"),
                     .dampening = v.at("dampening"),
                     .weight_decay = v.at("weight_decay"),
                     .nesterov = v.at("nesterov") != 0};
  validate(o);
  if (!check_only) set_options(group, o);
}

// torch.optim.sgd._single_tensor_sgd (PyTorch 1.13).
void SGD::update(std::size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  const SGDOptions& o = options_[group];
  // After the first step (whose buffer is a copy of the gradient), one fused op per parameter.
  const auto it0 = state.buffers.find("momentum_buffer");
  const Tensor buffer = it0 == state.buffers.end() ? Tensor() : it0->second;
  if ((o.momentum == 0 || buffer.defined()) && fused_step_applies({param, grad, buffer})) {
    sgd_step_(param, buffer, grad,
              {.lr = o.lr,
               .momentum = o.momentum,
               .dampening = o.dampening,
               .weight_decay = o.weight_decay,
               .nesterov = o.nesterov});
    return;
  }
  Tensor d_p = o.weight_decay != 0 ? add_scaled(grad, param, o.weight_decay) : grad;
  if (o.momentum != 0) {
    auto it = state.buffers.find("momentum_buffer");
    if (it == state.buffers.end()) {
      it = state.buffers.emplace("momentum_buffer", clone(d_p)).first;
    } else {
      mul_(it->second, o.momentum);
      add_(it->second, d_p, 1 - o.dampening);
    }
    d_p = o.nesterov ? add_scaled(d_p, it->second, o.momentum) : it->second;
  }
  add_(param, d_p, -o.lr);
}

// --------------------------------------------------------------------------------- Adam, AdamW

void validate(const AdamOptions& o) {
  validate_adam("Adam", o);
}
void validate(const AdamWOptions& o) {
  validate_adam("AdamW", o);
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options) {
  add_param_group(std::move(params), options);
}

std::map<std::string, double> Adam::hyperparameters(std::size_t group) const {
  return adam_hyperparameters(options(group));
}

void Adam::set_hyperparameters(std::size_t group, const std::map<std::string, double>& v,
                               bool check_only) {
  const auto o = adam_options_from<AdamOptions>("Adam", v);
  validate(o);
  if (!check_only) set_options(group, o);
}

void Adam::update(std::size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  const AdamOptions& o = options_[group];
  adam_update(param, grad, state, o.lr, o.betas.first, o.betas.second, o.eps, o.weight_decay,
              o.amsgrad,
              /*decoupled=*/false);
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options) {
  add_param_group(std::move(params), options);
}

std::map<std::string, double> AdamW::hyperparameters(std::size_t group) const {
  return adam_hyperparameters(options(group));
}

void AdamW::set_hyperparameters(std::size_t group, const std::map<std::string, double>& v,
                                bool check_only) {
  const auto o = adam_options_from<AdamWOptions>("AdamW", v);
  validate(o);
  if (!check_only) set_options(group, o);
}

void AdamW::update(std::size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  const AdamWOptions& o = options_[group];
  adam_update(param, grad, state, o.lr, o.betas.first, o.betas.second, o.eps, o.weight_decay,
              o.amsgrad,
              /*decoupled=*/true);
}

}  // namespace remat::nn
