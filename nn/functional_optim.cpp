#include "nn/functional_optim.h"

#include <cmath>
#include <string_view>

#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/view.h"

namespace remat::nn {
namespace {

void check_step_inputs(std::string_view who, std::span<const Tensor> params,
                       std::span<const Tensor> grads, std::size_t state_size) {
  REMAT_CHECK(params.size() == grads.size(), "{}: {} parameters but {} gradients", who,
              params.size(), grads.size());
  REMAT_CHECK(state_size == 0 || state_size == params.size(),
              "{}: the state holds {} entries for {} parameters", who, state_size, params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    REMAT_CHECK(params[i].defined() && grads[i].defined(),
                "{}: parameter {} or its gradient is undefined", who, i);
    REMAT_CHECK(params[i].shape() == grads[i].shape() && params[i].dtype() == grads[i].dtype(),
                "{}: parameter {} has shape {} and dtype {} but its gradient shape {} and dtype {}",
                who, i, params[i].shape(), params[i].dtype(), grads[i].shape(), grads[i].dtype());
  }
}

// sqrt(v) for v >= 0 whose derivative at v = 0 is 0 instead of infinite.  A parameter whose
// gradient is exactly 0 (a ReLU unit dead for the whole batch) has v = 0 and a zero first
// moment; its update's derivative would be 0 * inf = NaN and poison every gradient the unrolled
// chain feeds.  The value is sqrt's, bit for bit.
Tensor sqrt_zero_safe(const Tensor& v) {
  const Tensor positive = gt(v, 0.0);
  return where(positive, sqrt(where(positive, v, ones_like(v))), zeros_like(v));
}

// A copy outside the graph of a stateful optimizer's buffer.
Tensor copy_of(const Tensor& t) {
  return clone(detach(t));
}

}  // namespace

SGDState SGDState::of(const SGD& optimizer, std::size_t group) {
  SGDState s;
  const auto& params = optimizer.params(group);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamState* p = optimizer.state(group, i);
    const bool has = p && p->buffers.count("momentum_buffer");
    REMAT_CHECK(has == !s.momentum_buffer.empty() || i == 0,
                "SGDState::of: parameter {} of group {} {} a momentum buffer but parameter 0 {}", i,
                group, has ? "has" : "has no", has ? "has none" : "has one");
    if (has) s.momentum_buffer.push_back(copy_of(p->buffers.at("momentum_buffer")));
  }
  return s;
}

AdamState AdamState::of(const Adam& optimizer, std::size_t group) {
  AdamState s;
  const auto& params = optimizer.params(group);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamState* p = optimizer.state(group, i);
    const std::int64_t step = p ? p->step : 0;
    REMAT_CHECK(i == 0 || step == s.step,
                "AdamState::of: parameter {} of group {} has taken {} steps but parameter 0 {}", i,
                group, step, s.step);
    s.step = step;
    if (!p) continue;
    s.exp_avg.push_back(copy_of(p->buffers.at("exp_avg")));
    s.exp_avg_sq.push_back(copy_of(p->buffers.at("exp_avg_sq")));
    if (p->buffers.count("max_exp_avg_sq"))
      s.max_exp_avg_sq.push_back(copy_of(p->buffers.at("max_exp_avg_sq")));
  }
  return s;
}

std::vector<Tensor> sgd_step(std::span<const Tensor> params, std::span<const Tensor> grads,
                             SGDState& state, const SGDOptions& o) {
  validate(o);
  check_step_inputs("sgd_step", params, grads, state.momentum_buffer.size());
  const bool first = state.momentum_buffer.empty();
  std::vector<Tensor> out, buffers;
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor d = grads[i];
    if (o.weight_decay != 0) d = add(d, mul(params[i], o.weight_decay));
    if (o.momentum != 0) {
      const Tensor buf =
          first ? d : add(mul(state.momentum_buffer[i], o.momentum), mul(d, 1 - o.dampening));
      buffers.push_back(buf);
      d = o.nesterov ? add(d, mul(buf, o.momentum)) : buf;
    }
    out.push_back(sub(params[i], mul(d, o.lr)));
  }
  if (o.momentum != 0) state.momentum_buffer = std::move(buffers);
  return out;
}

std::vector<Tensor> adam_step(std::span<const Tensor> params, std::span<const Tensor> grads,
                              AdamState& state, const AdamOptions& o) {
  validate(o);
  check_step_inputs("adam_step", params, grads, state.exp_avg.size());
  REMAT_CHECK(state.exp_avg_sq.size() == state.exp_avg.size(),
              "adam_step: the state holds {} first and {} second moments", state.exp_avg.size(),
              state.exp_avg_sq.size());
  const bool first = state.exp_avg.empty();
  REMAT_CHECK(!o.amsgrad || first || state.max_exp_avg_sq.size() == params.size(),
              "adam_step: amsgrad needs max_exp_avg_sq for each of the {} parameters, the state "
              "holds {}",
              params.size(), state.max_exp_avg_sq.size());
  const auto [beta1, beta2] = o.betas;
  const std::int64_t step = state.step + 1;
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, static_cast<double>(step)));
  const double step_size = o.lr / bias_correction1;
  AdamState next;
  next.step = step;
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor g = grads[i];
    if (o.weight_decay != 0) g = add(g, mul(params[i], o.weight_decay));
    // A fresh state's moments are zero: beta * 0 + (1 - beta) * g needs no zeros tensor.
    const Tensor m =
        first ? mul(g, 1 - beta1) : add(mul(state.exp_avg[i], beta1), mul(g, 1 - beta1));
    const Tensor g2 = mul(g, g);
    const Tensor v =
        first ? mul(g2, 1 - beta2) : add(mul(state.exp_avg_sq[i], beta2), mul(g2, 1 - beta2));
    Tensor second = v;
    if (o.amsgrad) {
      second = first ? v : maximum(state.max_exp_avg_sq[i], v);
      next.max_exp_avg_sq.push_back(second);
    }
    const Tensor denom = add(div(sqrt_zero_safe(second), bias_correction2_sqrt), o.eps);
    out.push_back(sub(params[i], mul(div(m, denom), step_size)));
    next.exp_avg.push_back(m);
    next.exp_avg_sq.push_back(v);
  }
  state = std::move(next);
  return out;
}

}  // namespace remat::nn
