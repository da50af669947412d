#include "ops/optimizer_step.h"

#include <cmath>

#include "core/parallel.h"
#include "ops/cpu/loops.h"
#include "ops/cuda/device_args.h"
#include "ops/op.h"

namespace remat {
namespace {

// Elements per parallel chunk: an update is a few flops per element, memory-bound.
constexpr std::int64_t kGrain = kMinParallelWork;

void check_same(std::string_view op, std::span<const TensorMeta> in) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    REMAT_CHECK(is_floating(in[i].dtype) && in[i].dtype == in[0].dtype,
                "{}: expected floating-point tensors of one dtype, got {} (argument {}) and {}", op,
                in[i].dtype, i, in[0].dtype);
    REMAT_CHECK(in[i].shape == in[0].shape,
                "{}: argument {} has shape {}, the parameter has shape {}", op, i, in[i].shape,
                in[0].shape);
    REMAT_CHECK(in[i].is_contiguous(), "{}: argument {} of shape {} is not contiguous", op, i,
                in[i].shape);
  }
}

// Inputs {param, exp_avg, exp_avg_sq, [max_exp_avg_sq], grad}; outputs the first three (four).
class AdamStepOp final : public Op {
 public:
  AdamStepOp(const AdamStepParams& p, bool amsgrad) : p_(p), amsgrad_(amsgrad) {}
  std::string_view name() const override { return "adam_step_"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == (amsgrad_ ? 5u : 4u), "adam_step_: expected {} tensors, got {}",
                amsgrad_ ? 5 : 4, in.size());
    check_same(name(), in);
    return {in.begin(), in.end() - 1};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const std::int64_t n = in[0].meta->numel();
    const double step = static_cast<double>(p_.step);
    const double bias_correction1 = 1 - std::pow(p_.beta1, step);
    const double bias_correction2_sqrt = std::sqrt(1 - std::pow(p_.beta2, step));
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T decay = static_cast<T>(1 - p_.lr * p_.weight_decay),
              wd = static_cast<T>(p_.weight_decay);
      const T b1 = static_cast<T>(p_.beta1), c1 = static_cast<T>(1 - p_.beta1);
      const T b2 = static_cast<T>(p_.beta2), c2 = static_cast<T>(1 - p_.beta2);
      const T bc2 = static_cast<T>(bias_correction2_sqrt), eps = static_cast<T>(p_.eps);
      const T neg_step = static_cast<T>(-(p_.lr / bias_correction1));
      const bool decoupled = p_.decoupled, coupled = !p_.decoupled && p_.weight_decay != 0;
      const T *p_in = in[0].data<T>(), *m_in = in[1].data<T>(), *v_in = in[2].data<T>();
      const T* mx_in = amsgrad_ ? in[3].data<T>() : nullptr;
      const T* g_in = in[amsgrad_ ? 4 : 3].data<T>();
      T *p_out = out[0].data<T>(), *m_out = out[1].data<T>(), *v_out = out[2].data<T>();
      T* mx_out = amsgrad_ ? out[3].data<T>() : nullptr;
      // amsgrad's extra buffer as a template argument: a conditional load and store in the
      // loop would keep it from vectorising.  Captured by value: through references the
      // compiler cannot prove that the stores leave the scalars alone, and gives up.
      auto update = [=]<bool Ams>(std::int64_t b, std::int64_t e) {
#pragma omp simd
        for (std::int64_t i = b; i < e; ++i) {
          T p = p_in[i], g = g_in[i];
          if (decoupled) p = static_cast<T>(p * decay);
          if (coupled) g = static_cast<T>(g + wd * p);
          T m = static_cast<T>(m_in[i] * b1);
          m = static_cast<T>(m + c1 * g);
          T v = static_cast<T>(v_in[i] * b2);
          v = static_cast<T>(v + c2 * g * g);
          T r = v;
          if constexpr (Ams) {
            const T old = mx_in[i];
            r = old != old || old > v ? old : v;
            mx_out[i] = r;
          }
          const T d = static_cast<T>(static_cast<T>(std::sqrt(r) / bc2) + eps);
          p_out[i] = static_cast<T>(p + neg_step * m / d);
          m_out[i] = m;
          v_out[i] = v;
        }
      };
      parallel_for(0, n, kGrain, [&](std::int64_t b, std::int64_t e) {
        if (amsgrad_)
          update.template operator()<true>(b, e);
        else
          update.template operator()<false>(b, e);
      });
    });
  }
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta>) const override {
    return 12.0 * static_cast<double>(in[0].numel());
  }

 private:
  AdamStepParams p_;
  bool amsgrad_;
};

// Inputs {param, [momentum_buffer], grad}; outputs param (and the buffer).
class SgdStepOp final : public Op {
 public:
  explicit SgdStepOp(const SgdStepParams& p) : p_(p) {}
  std::string_view name() const override { return "sgd_step_"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const bool momentum = p_.momentum != 0;
    REMAT_CHECK(in.size() == (momentum ? 3u : 2u), "sgd_step_: expected {} tensors, got {}",
                momentum ? 3 : 2, in.size());
    check_same(name(), in);
    return {in.begin(), in.end() - 1};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const std::int64_t n = in[0].meta->numel();
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T wd = static_cast<T>(p_.weight_decay), mu = static_cast<T>(p_.momentum);
      const T damp = static_cast<T>(1 - p_.dampening), neg_lr = static_cast<T>(-p_.lr);
      const bool decay = p_.weight_decay != 0, momentum = p_.momentum != 0;
      const bool nesterov = p_.nesterov;
      const T* p_in = in[0].data<T>();
      const T* buf_in = momentum ? in[1].data<T>() : nullptr;
      const T* g_in = in[momentum ? 2 : 1].data<T>();
      T* p_out = out[0].data<T>();
      T* buf_out = momentum ? out[1].data<T>() : nullptr;
      auto update = [=]<bool Momentum>(std::int64_t b, std::int64_t e) {
#pragma omp simd
        for (std::int64_t i = b; i < e; ++i) {
          const T p = p_in[i];
          T d = g_in[i];
          if (decay) d = static_cast<T>(d + wd * p);
          if constexpr (Momentum) {
            T buf = static_cast<T>(buf_in[i] * mu);
            buf = static_cast<T>(buf + damp * d);
            buf_out[i] = buf;
            d = nesterov ? static_cast<T>(d + mu * buf) : buf;
          }
          p_out[i] = static_cast<T>(p + neg_lr * d);
        }
      };
      parallel_for(0, n, kGrain, [&](std::int64_t b, std::int64_t e) {
        if (momentum)
          update.template operator()<true>(b, e);
        else
          update.template operator()<false>(b, e);
      });
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const bool momentum = p_.momentum != 0;
    detail::cuda_launch::sgd_step(detail::scalar_of(in[0].meta->dtype), in[0].meta->numel(),
                                  in[0].bytes(), momentum ? in[1].bytes() : nullptr,
                                  in[momentum ? 2 : 1].bytes(), out[0].bytes(),
                                  momentum ? out[1].bytes() : nullptr, p_.lr, p_.momentum,
                                  p_.dampening, p_.weight_decay, p_.nesterov);
  }
#endif
  double flops(std::span<const TensorMeta> in, std::span<const TensorMeta>) const override {
    return 6.0 * static_cast<double>(in[0].numel());
  }

 private:
  SgdStepParams p_;
};

}  // namespace

bool fused_step_applies(std::initializer_list<Tensor> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!t.is_contiguous() || !is_floating(t.dtype())) return false;
    if (first && (t.shape() != first->shape() || t.dtype() != first->dtype() ||
                  t.device() != first->device()))
      return false;
    if (!first) first = &t;
  }
  return first != nullptr;
}

void adam_step_(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& max_exp_avg_sq, const Tensor& grad, const AdamStepParams& p) {
  REMAT_CHECK(p.step >= 1, "adam_step_: step must be at least 1, got {}", p.step);
  const bool amsgrad = max_exp_avg_sq.defined();
  const auto op = std::make_shared<AdamStepOp>(p, amsgrad);
  if (amsgrad) {
    const Tensor targets[] = {param, exp_avg, exp_avg_sq, max_exp_avg_sq};
    call_inplace(op, targets, std::span<const Tensor>(&grad, 1));
  } else {
    const Tensor targets[] = {param, exp_avg, exp_avg_sq};
    call_inplace(op, targets, std::span<const Tensor>(&grad, 1));
  }
}

void sgd_step_(const Tensor& param, const Tensor& momentum_buffer, const Tensor& grad,
               const SgdStepParams& p) {
  REMAT_CHECK(p.momentum == 0 || momentum_buffer.defined(),
              "sgd_step_: momentum {} needs a momentum buffer", p.momentum);
  const auto op = std::make_shared<SgdStepOp>(p);
  if (p.momentum != 0) {
    const Tensor targets[] = {param, momentum_buffer};
    call_inplace(op, targets, std::span<const Tensor>(&grad, 1));
  } else {
    call_inplace(op, std::span<const Tensor>(&param, 1), std::span<const Tensor>(&grad, 1));
  }
}

}  // namespace remat
