// The fused optimizer updates against torch.optim's single-tensor formulas written out here in
// double, element by element, over several steps and every option; and their argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "remat.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::throws_with;

struct AdamCase {
  AdamStepParams p;
  bool amsgrad;
};

// torch.optim.adam._single_tensor_adam / adamw._single_tensor_adamw for one element.
void adam_reference(double& param, double& m, double& v, double& vmax, double grad,
                    const AdamStepParams& p, bool amsgrad) {
  if (p.decoupled) param *= 1 - p.lr * p.weight_decay;
  if (!p.decoupled && p.weight_decay != 0) grad += p.weight_decay * param;
  m = m * p.beta1 + (1 - p.beta1) * grad;
  v = v * p.beta2 + (1 - p.beta2) * grad * grad;
  const double bc1 = 1 - std::pow(p.beta1, static_cast<double>(p.step));
  const double bc2 = 1 - std::pow(p.beta2, static_cast<double>(p.step));
  double r = v;
  if (amsgrad) r = vmax = std::max(vmax, v);
  param -= p.lr / bc1 * m / (std::sqrt(r) / std::sqrt(bc2) + p.eps);
}

TEST(OptimizerStep, AdamMatchesTorchFormulasOverSteps) {
  const std::vector<AdamCase> cases = {
      {{.lr = 1e-2}, false},
      {{.lr = 3e-3, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1}, false},
      {{.lr = 1e-2, .weight_decay = 0.05, .decoupled = true}, false},
      {{.lr = 1e-2, .weight_decay = 0.01}, true},
  };
  for (const AdamCase& c : cases) {
    const std::int64_t n = 1000;
    Tensor param = mul(randn({n}, {.dtype = DType::Float64, .seed = 1}), 1.0);
    Tensor m = zeros({n}, {.dtype = DType::Float64});
    Tensor v = zeros({n}, {.dtype = DType::Float64});
    Tensor vmax = c.amsgrad ? zeros({n}, {.dtype = DType::Float64}) : Tensor();
    std::vector<double> rp = param.to_vector<double>(), rm(n, 0), rv(n, 0), rmax(n, 0);
    for (std::int64_t step = 1; step <= 4; ++step) {
      // A gradient that shrinks for some elements, so amsgrad's maximum matters.
      const Tensor grad =
          mul(randn({n}, {.dtype = DType::Float64, .seed = 10 + static_cast<std::uint64_t>(step)}),
              1.0 / static_cast<double>(step));
      AdamStepParams p = c.p;
      p.step = step;
      adam_step_(param, m, v, vmax, grad, p);
      const std::vector<double> g = grad.to_vector<double>();
      for (std::int64_t i = 0; i < n; ++i)
        adam_reference(rp[i], rm[i], rv[i], rmax[i], g[i], p, c.amsgrad);
    }
    EXPECT_TRUE(all_close(param, tensor<double>(rp), 1e-13, 1e-15));
    EXPECT_TRUE(all_close(m, tensor<double>(rm), 1e-13, 1e-15));
    EXPECT_TRUE(all_close(v, tensor<double>(rv), 1e-13, 1e-15));
    if (c.amsgrad) {
      EXPECT_TRUE(all_close(vmax, tensor<double>(rmax), 1e-13, 1e-15));
    }
  }
}

TEST(OptimizerStep, SgdMatchesTorchFormulasOverSteps) {
  const std::vector<SgdStepParams> cases = {
      {.lr = 0.1},
      {.lr = 0.1, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-3},
      {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true},
  };
  for (const SgdStepParams& p : cases) {
    const std::int64_t n = 700;
    Tensor param = randn({n}, {.dtype = DType::Float64, .seed = 2});
    std::vector<double> rp = param.to_vector<double>(), rb(n, 0);
    Tensor buf;
    for (std::uint64_t step = 1; step <= 4; ++step) {
      const Tensor grad = randn({n}, {.dtype = DType::Float64, .seed = 20 + step});
      const std::vector<double> g = grad.to_vector<double>();
      std::vector<double> d(n);
      for (std::int64_t i = 0; i < n; ++i) d[i] = g[i] + p.weight_decay * rp[i];
      if (p.momentum != 0 && step == 1) {
        // torch's first step: the buffer is the gradient itself; the fused op takes it from
        // there, so this step is the reference's alone.
        rb = d;
        for (std::int64_t i = 0; i < n; ++i)
          rp[i] -= p.lr * (p.nesterov ? d[i] + p.momentum * rb[i] : rb[i]);
        param = tensor<double>(rp);
        buf = tensor<double>(rb);
        continue;
      }
      for (std::int64_t i = 0; i < n; ++i) {
        if (p.momentum != 0) {
          rb[i] = rb[i] * p.momentum + (1 - p.dampening) * d[i];
          d[i] = p.nesterov ? d[i] + p.momentum * rb[i] : rb[i];
        }
        rp[i] -= p.lr * d[i];
      }
      sgd_step_(param, buf, grad, p);
    }
    EXPECT_TRUE(all_close(param, tensor<double>(rp), 1e-13, 1e-15));
    if (p.momentum != 0) {
      EXPECT_TRUE(all_close(buf, tensor<double>(rb), 1e-13, 1e-15));
    }
  }
}

TEST(OptimizerStep, Float32AgreesWithFloat64) {
  const Tensor p64 = randn({300}, {.dtype = DType::Float64, .seed = 3});
  const Tensor g64 = randn({300}, {.dtype = DType::Float64, .seed = 4});
  Tensor p32 = to_dtype(p64, DType::Float32), g32 = to_dtype(g64, DType::Float32);
  Tensor p = clone(p64);
  Tensor m64 = zeros({300}, {.dtype = DType::Float64}),
         v64 = zeros({300}, {.dtype = DType::Float64});
  Tensor m32 = zeros({300}), v32 = zeros({300});
  adam_step_(p, m64, v64, Tensor(), g64, {.lr = 1e-2});
  adam_step_(p32, m32, v32, Tensor(), g32, {.lr = 1e-2});
  EXPECT_TRUE(all_close(to_dtype(p32, DType::Float64), p, 1e-6, 1e-6));
}

TEST(OptimizerStep, BadArgumentsNameWhatIsWrong) {
  const Tensor p = zeros({4, 3}), m = zeros({4, 3}), v = zeros({4, 3});
  EXPECT_TRUE(throws_with(
      [&] {
        adam_step_(p, m, v, Tensor(), zeros({3, 4}), {});
      },
      {"adam_step_", "[3, 4]", "[4, 3]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        adam_step_(p, m, v, Tensor(), transpose(zeros({3, 4}), 0, 1), {});
      },
      {"adam_step_", "not contiguous"}));
  EXPECT_TRUE(throws_with(
      [&] {
        adam_step_(p, m, v, Tensor(), zeros({4, 3}, {.dtype = DType::Float64}), {});
      },
      {"adam_step_", "float64"}));
  EXPECT_TRUE(throws_with(
      [&] {
        adam_step_(p, p, v, Tensor(), zeros({4, 3}), {});
      },
      {"adam_step_", "share their storage"}));
  EXPECT_TRUE(throws_with(
      [&] {
        adam_step_(p, m, v, Tensor(), zeros({4, 3}), {.step = 0});
      },
      {"adam_step_", "step"}));
  EXPECT_TRUE(throws_with(
      [&] {
        sgd_step_(p, Tensor(), zeros({4, 3}), {.momentum = 0.9});
      },
      {"sgd_step_", "momentum buffer"}));
  const Tensor leaf = zeros({4, 3}).set_requires_grad(true);
  EXPECT_TRUE(throws_with(
      [&] {
        sgd_step_(leaf, Tensor(), zeros({4, 3}), {});
      },
      {"sgd_step_", "not differentiable"}));
}

}  // namespace
}  // namespace remat
