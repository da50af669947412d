#include "ops/loss.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "autograd/grad_mode.h"
#include "core/cuda.h"
#include "ops/cpu/loops.h"
#include "ops/cuda/device_args.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/index.h"
#include "ops/nll_math.h"
#include "ops/op.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/view.h"

namespace remat {
namespace {

// ------------------------------------------------------------------ negative log-likelihood
// Inputs: log-probabilities [N, C, d...] and int64 targets [N, d...] (both contiguous), then the
// class weights [C] when present.  Outputs, per target element: the loss -w[t] * logp[n, t, d],
// the weight w[t] (0 where ignored, so its sum is the mean's denominator) and the safe index
// ([N, 1, d...], t or 0 where ignored) that the derivative scatters through.
class NllLossOp final : public Op {
 public:
  NllLossOp(std::string_view caller, std::int64_t ignore_index, bool has_weight)
      : caller_(caller), ignore_index_(ignore_index), has_weight_(has_weight) {}
  std::string_view name() const override { return "nll_loss"; }
  SaveSpec saves() const override { return {0, 0b110}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& x = in[0];
    REMAT_CHECK(x.is_contiguous() && in[1].is_contiguous(),
                "{}: internal error, inputs of shapes {} and {} are not contiguous", caller_,
                x.shape, in[1].shape);
    Shape index_shape = x.shape;
    index_shape[1] = 1;
    const auto per_target = TensorMeta::contiguous(in[1].shape, x.dtype, x.device);
    return {per_target, per_target, TensorMeta::contiguous(index_shape, DType::Int64, x.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    const std::int64_t classes = m.shape[1];
    const std::int64_t n_targets = in[1].meta->numel();
    const std::int64_t inner = m.shape[0] == 0 ? 1 : n_targets / m.shape[0];
    const std::int64_t* target = in[1].data<std::int64_t>();
    std::int64_t* index = out[2].data<std::int64_t>();
    detail::visit_floating(m.dtype, [&]<class T>() {
      const T* logp = in[0].data<T>();
      const T* weight = has_weight_ ? in[2].data<T>() : nullptr;
      T* loss = out[0].data<T>();
      T* wt = out[1].data<T>();
      std::atomic<bool> bad{false};
      parallel_for(0, n_targets, 4096, [&](std::int64_t b, std::int64_t e) {
        // An out-of-range target is reported after the loop (no exception may leave a worker
        // thread); it gets the ignored value meanwhile.
        for (std::int64_t i = b; i < e; ++i)
          if (!detail::nll_target(i, classes, inner, logp, target, weight, ignore_index_, loss, wt,
                                  index))
            bad = true;
      });
      if (!bad) return;
      for (std::int64_t i = 0; i < n_targets; ++i) {
        const std::int64_t t = target[i];
        REMAT_CHECK(t == ignore_index_ || (t >= 0 && t < classes),
                    "{}: target {} at position {} is out of range for {} classes (expected 0 <= "
                    "target < {}, or ignore_index {}); input shape {}, target shape {}",
                    caller_, t, i, classes, classes, ignore_index_, m.shape, in[1].meta->shape);
      }
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta& m = *in[0].meta;
    const std::int64_t classes = m.shape[1];
    const std::int64_t n_targets = in[1].meta->numel();
    const std::int64_t inner = m.shape[0] == 0 ? 1 : n_targets / m.shape[0];
    const auto* target = reinterpret_cast<const std::int64_t*>(in[1].bytes());
    const std::int64_t bad = detail::cuda_launch::nll_loss(
        detail::scalar_of(m.dtype), n_targets, classes, inner, in[0].bytes(), target,
        has_weight_ ? in[2].bytes() : nullptr, ignore_index_, out[0].bytes(), out[1].bytes(),
        reinterpret_cast<std::int64_t*>(out[2].bytes()));
    if (bad < 0) return;
    std::int64_t t = 0;
    detail::cuda_memory::copy_to_host(&t, target + bad, sizeof t);
    REMAT_THROW(
        "{}: target {} at position {} is out of range for {} classes (expected 0 <= target < {}, "
        "or ignore_index {}); input shape {}, target shape {}",
        caller_, t, bad, classes, classes, ignore_index_, m.shape, in[1].meta->shape);
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const TensorMeta& m = c.input_meta(0);
    Tensor coef = unsqueeze(neg(mul(c.grad(0), c.output(1))), 1);
    Tensor g = scatter_add(zeros(m.shape, {m.dtype, m.device}), 1, c.output(2), coef);
    std::vector<Tensor> grads{g, Tensor()};
    if (has_weight_) grads.push_back(Tensor());
    return grads;
  }

 private:
  std::string_view caller_;  // the public function, for error messages
  std::int64_t ignore_index_;
  bool has_weight_;
};

// ------------------------------------------------------------------ BCE with logits
class BceWithLogitsOp final : public Op {
 public:
  std::string_view name() const override { return "binary_cross_entropy_with_logits"; }
  SaveSpec saves() const override { return {0b11, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    return {TensorMeta::contiguous(in[0].shape, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      // max(x, 0) - x t + log(1 + exp(-|x|)): no overflow for any x.
      detail::map_kernel<T, T, T>(out[0], {in[0], in[1]}, [](T x, T t) {
        return static_cast<T>((x > T(0) ? x : T(0)) - x * t + std::log1p(std::exp(-std::abs(x))));
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    const Tensor& x = c.input(0);
    Tensor gx = c.needs(0) ? mul(g, sub(sigmoid(x), c.input(1))) : Tensor();
    Tensor gt = c.needs(1) ? neg(mul(g, x)) : Tensor();
    return {gx, gt};
  }
};

Tensor reduce(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return sum(loss);
    case Reduction::Mean:
      return mean(loss);
  }
  REMAT_THROW("loss: unknown reduction {}", static_cast<int>(reduction));
}

// Checks the [N, C, d...] / [N, d...] layout (after unbatched inputs gained their N) and the
// class weights; names the public function and the shapes.
void check_class_args(std::string_view op, const Tensor& input, const Tensor& targets,
                      const Tensor& weight) {
  REMAT_CHECK(input.defined() && targets.defined(), "{}: input or target is an undefined tensor",
              op);
  REMAT_CHECK(is_floating(input.dtype()), "{}: expected a floating-point input, got {} of shape {}",
              op, input.dtype(), input.shape());
  REMAT_CHECK(
      targets.dtype() == DType::Int64,
      "{}: expected int64 class indices as target, got {} (input shape {}, target shape {})", op,
      targets.dtype(), input.shape(), targets.shape());
  REMAT_CHECK(input.dim() >= 1, "{}: expected an input of shape [N, C, ...] or [C], got shape {}",
              op, input.shape());
  Shape expected;
  if (input.dim() >= 2) {
    expected.push_back(input.size(0));
    for (std::int64_t d = 2; d < input.dim(); ++d) expected.push_back(input.size(d));
  }
  REMAT_CHECK(targets.shape() == expected,
              "{}: target of shape {} does not fit input of shape {} (expected target shape {})",
              op, targets.shape(), input.shape(), expected);
  REMAT_CHECK(input.dim() == 1 || input.size(1) > 0, "{}: input of shape {} has no classes", op,
              input.shape());
  if (!weight.defined()) return;
  const std::int64_t classes = input.dim() == 1 ? input.size(0) : input.size(1);
  REMAT_CHECK(weight.shape() == Shape{classes},
              "{}: class weight of shape {} does not fit input of shape {} (expected [{}])", op,
              weight.shape(), input.shape(), classes);
  REMAT_CHECK(weight.dtype() == input.dtype(), "{}: class weight has dtype {} but the input has {}",
              op, weight.dtype(), input.dtype());
  // As in PyTorch, the class weights are constants of the loss.
  REMAT_CHECK(!(weight.requires_grad() && GradMode::is_enabled()),
              "{}: the class weight (shape {}) requires grad, but the loss has no derivative with "
              "respect to it; pass a detached weight",
              op, weight.shape());
}

struct NllParts {
  Tensor loss;  // per target
  Tensor wt;    // per target weight, 0 where ignored (no history)
};

// Arguments already checked and batched ([N, C, ...]).
NllParts nll_parts(std::string_view op, const Tensor& log_probs, const Tensor& targets,
                   std::int64_t ignore_index, const Tensor& weight) {
  std::vector<Tensor> inputs{contiguous(log_probs), contiguous(targets)};
  if (weight.defined()) inputs.push_back(contiguous(weight));
  auto outs =
      call(std::make_shared<NllLossOp>(op, ignore_index, weight.defined()), std::move(inputs));
  return {outs[0], detach(outs[1])};
}

Tensor reduce_weighted(const Tensor& loss, const Tensor& wt, Reduction reduction) {
  switch (reduction) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return sum(loss);
    case Reduction::Mean:
      return div(sum(loss), sum(wt));  // 0 / 0 = nan when all are ignored
  }
  REMAT_THROW("loss: unknown reduction {}", static_cast<int>(reduction));
}

// Unbatched [C] inputs with a 0-dim target run as a batch of one.
bool unbatched(const Tensor& input) {
  return input.defined() && input.dim() == 1;
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const NllLossOptions& options) {
  check_class_args("nll_loss", log_probs, targets, options.weight);
  const bool single = unbatched(log_probs);
  const Tensor x = single ? unsqueeze(log_probs, 0) : log_probs;
  const Tensor t = single ? unsqueeze(targets, 0) : targets;
  auto parts = nll_parts("nll_loss", x, t, options.ignore_index, options.weight);
  Tensor out = reduce_weighted(parts.loss, parts.wt, options.reduction);
  return single && options.reduction == Reduction::None ? reshape(out, {}) : out;
}

namespace {
// Targets that are class probabilities of the logits' shape (torch.nn.functional.cross_entropy
// with floating targets): -sum_c w_c t_c log p_c per example, smoothed towards 1/C; mean divides
// by the number of examples (and positions), as PyTorch does for this form.
Tensor cross_entropy_probabilities(const Tensor& logits, const Tensor& targets,
                                   const CrossEntropyOptions& o) {
  REMAT_CHECK(is_floating(logits.dtype()) && targets.dtype() == logits.dtype() &&
                  targets.shape() == logits.shape(),
              "cross_entropy: probability targets must have the logits' shape and dtype, got {} {} "
              "for logits {} {}",
              targets.dtype(), targets.shape(), logits.dtype(), logits.shape());
  const bool single = unbatched(logits);
  const Tensor x = single ? unsqueeze(logits, 0) : logits;
  Tensor t = single ? unsqueeze(targets, 0) : targets;
  const std::int64_t classes = x.size(1);
  if (o.label_smoothing > 0)
    t = add(mul(t, 1.0 - o.label_smoothing), o.label_smoothing / static_cast<double>(classes));
  Tensor prod = mul(log_softmax(x, 1), t);
  if (o.weight.defined()) {
    REMAT_CHECK(o.weight.dim() == 1 && o.weight.size(0) == classes,
                "cross_entropy: weight must have shape [{}], got {}", classes, o.weight.shape());
    Shape s(static_cast<std::size_t>(x.dim()), 1);
    s[1] = classes;
    prod = mul(prod, reshape(o.weight, s));
  }
  Tensor loss = neg(sum(prod, {1}));
  if (single && o.reduction == Reduction::None) return reshape(loss, {});
  return reduce(loss, o.reduction);
}
}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     const CrossEntropyOptions& options) {
  REMAT_CHECK(options.label_smoothing >= 0 && options.label_smoothing <= 1,
              "cross_entropy: label_smoothing must be in [0, 1], got {}", options.label_smoothing);
  // Floating targets of the logits' shape are probabilities; anything else must be indices.
  if (logits.defined() && targets.defined() && is_floating(targets.dtype()) &&
      targets.shape() == logits.shape())
    return cross_entropy_probabilities(logits, targets, options);
  check_class_args("cross_entropy", logits, targets, options.weight);
  const double eps = options.label_smoothing;
  const bool single = unbatched(logits);
  const Tensor x = single ? unsqueeze(logits, 0) : logits;
  const Tensor t = single ? unsqueeze(targets, 0) : targets;
  const Tensor logp = log_softmax(x, 1);
  auto parts = nll_parts("cross_entropy", logp, t, options.ignore_index, options.weight);
  Tensor out = reduce_weighted(parts.loss, parts.wt, options.reduction);
  if (eps > 0) {
    // PyTorch's smoothing term: -sum_c w_c logp_c / C per target, 0 where ignored, reduced
    // with the same denominator as the NLL part.
    const std::int64_t classes = x.size(1);
    Tensor weighted = logp;
    if (options.weight.defined()) {
      Shape s(static_cast<std::size_t>(x.dim()), 1);
      s[1] = classes;
      weighted = mul(logp, reshape(options.weight, s));
    }
    Tensor valid = to_dtype(ne(t, static_cast<double>(options.ignore_index)), x.dtype());
    Tensor smooth = mul(neg(sum(weighted, {1})), valid);
    out = add(mul(out, 1.0 - eps), mul(reduce_weighted(smooth, parts.wt, options.reduction),
                                       eps / static_cast<double>(classes)));
  }
  return single && options.reduction == Reduction::None ? reshape(out, {}) : out;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  REMAT_CHECK(input.defined() && target.defined(),
              "mse_loss: input or target is an undefined tensor");
  REMAT_CHECK(input.shape() == target.shape(),
              "mse_loss: input of shape {} and target of shape {} differ", input.shape(),
              target.shape());
  REMAT_CHECK(is_floating(input.dtype()) && input.dtype() == target.dtype(),
              "mse_loss: expected floating-point input and target of one dtype, got {} (shape {}) "
              "and {} (shape {})",
              input.dtype(), input.shape(), target.dtype(), target.shape());
  Tensor d = sub(input, target);
  return reduce(mul(d, d), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        Reduction reduction) {
  constexpr const char* op = "binary_cross_entropy_with_logits";
  REMAT_CHECK(logits.defined() && targets.defined(), "{}: logits or targets is an undefined tensor",
              op);
  REMAT_CHECK(logits.shape() == targets.shape(),
              "{}: logits of shape {} and targets of shape {} differ", op, logits.shape(),
              targets.shape());
  REMAT_CHECK(is_floating(logits.dtype()) && logits.dtype() == targets.dtype(),
              "{}: expected floating-point logits and targets of one dtype, got {} (shape {}) and "
              "{} (shape {})",
              op, logits.dtype(), logits.shape(), targets.dtype(), targets.shape());
  static const auto bce = std::make_shared<BceWithLogitsOp>();
  return reduce(call1(bce, {logits, targets}), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        const BceWithLogitsOptions& options) {
  constexpr const char* op = "binary_cross_entropy_with_logits";
  if (!options.weight.defined() && !options.pos_weight.defined())
    return binary_cross_entropy_with_logits(logits, targets, options.reduction);
  binary_cross_entropy_with_logits(logits, targets, Reduction::None);  // the same argument checks
  // PyTorch's form: (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x), times weight.
  Tensor loss;
  if (options.pos_weight.defined()) {
    REMAT_CHECK(options.pos_weight.dtype() == logits.dtype(), "{}: pos_weight must be {}, got {}",
                op, logits.dtype(), options.pos_weight.dtype());
    Tensor log_weight = add(mul(targets, sub(options.pos_weight, 1.0)), 1.0);
    loss = add(mul(rsub(1.0, targets), logits), mul(log_weight, softplus(neg(logits))));
  } else {
    loss = add(mul(rsub(1.0, targets), logits), softplus(neg(logits)));
  }
  if (options.weight.defined()) {
    REMAT_CHECK(options.weight.dtype() == logits.dtype(), "{}: weight must be {}, got {}", op,
                logits.dtype(), options.weight.dtype());
    loss = mul(loss, options.weight);
  }
  REMAT_CHECK(loss.shape() == logits.shape(),
              "{}: weight and pos_weight must broadcast to the logits' shape {}, giving {}", op,
              logits.shape(), loss.shape());
  return reduce(loss, options.reduction);
}

}  // namespace remat
