#include "ops/dropout.h"

#include <cmath>

#include "core/random.h"
#include "ops/cpu/loops.h"
#include "ops/elementwise.h"
#include "ops/op.h"
#include "ops/view.h"

namespace remat {
namespace {

// y[i] = x[i] * (keep[i] ? 1 / (1 - p) : 0), keep[i] = (uniform(key, i) >= p), where element i
// reads lane i % 4 of philox(key, i / 4): the mask depends only on the key and the position.
// The op is linear with a diagonal Jacobian, so its derivative is the same op on the gradient:
// the mask is recomputed from the key, nothing is saved, and it is differentiable again.
class DropoutOp final : public Op {
 public:
  DropoutOp(double p, RngKey key) : p_(p), key_(key) {}
  std::string_view name() const override { return "dropout"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(is_floating(in[0].dtype),
                "dropout: expected a floating-point tensor, got {} of shape {}", in[0].dtype,
                in[0].shape);
    REMAT_CHECK(in[0].is_contiguous(),
                "dropout: internal error, input of shape {} is not contiguous", in[0].shape);
    return {TensorMeta::contiguous(in[0].shape, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const std::int64_t n = in[0].meta->numel();
    // Compared in float: uniform_from_bits gives multiples of 2^-24, exact in float.
    const float threshold = static_cast<float>(p_);
    detail::visit_floating(in[0].meta->dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      const T scale = static_cast<T>(1.0 / (1.0 - p_));
      parallel_for(0, (n + 3) / 4, 4096, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t blk = b; blk < e; ++blk) {
          const auto bits = philox4x32(key_, static_cast<std::uint64_t>(blk));
          const std::int64_t i0 = blk * 4, lanes = std::min<std::int64_t>(4, n - i0);
          for (std::int64_t l = 0; l < lanes; ++l)
            y[i0 + l] = x[i0 + l] * (uniform_from_bits(bits[l]) >= threshold ? scale : T(0));
        }
      });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {call1(std::make_shared<DropoutOp>(p_, key_), {contiguous(c.grad(0))})};
  }

 private:
  double p_;
  RngKey key_;
};

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, std::optional<std::uint64_t> seed) {
  REMAT_CHECK(x.defined(), "dropout: the input is an undefined tensor");
  REMAT_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got {} (input shape {})",
              p, x.shape());
  REMAT_CHECK(is_floating(x.dtype()),
              "dropout: expected a floating-point tensor, got {} of shape {}", x.dtype(),
              x.shape());
  if (!training || p == 0) return x;
  if (p == 1) return mul(x, 0.0);
  const RngKey key = seed ? RngKey{*seed, 0} : next_rng_key();
  return call1(std::make_shared<DropoutOp>(p, key), {contiguous(x)});
}

namespace detail {
Tensor dropout_with_key(const Tensor& x, double p, RngKey key) {
  REMAT_CHECK(x.defined() && is_floating(x.dtype()) && p > 0 && p < 1,
              "dropout: expected a floating-point tensor and 0 < p < 1, got p = {}", p);
  return call1(std::make_shared<DropoutOp>(p, key), {contiguous(x)});
}
}  // namespace detail

}  // namespace remat
