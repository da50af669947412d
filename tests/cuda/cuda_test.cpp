// The CUDA backend against the CPU, one harness for every op with a CUDA kernel (as ggml's
// test-backend-ops): the same inputs on both devices, outputs and gradients compared, and every
// CUDA op run twice from different buffers must give the same bits (replay after eviction relies
// on it).  Without a GPU every test skips, saying why.
#include "core/cuda.h"

#include <gtest/gtest.h>

#include <bit>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "dist/data_parallel.h"
#include "nn/nn.h"
#include "remat.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::bit_equal;

#define REMAT_SKIP_WITHOUT_GPU() \
  if (!cuda::available()) GTEST_SKIP() << cuda::unavailable_reason()

struct OpCase {
  std::string name;
  std::vector<Shape> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  bool differentiable = true;
};

// Broadcasting, strided (transposed) and plain operands of every kind with a CUDA kernel.
std::vector<OpCase> op_cases() {
  using V = const std::vector<Tensor>&;
  return {
      {"add", {{4, 5}, {5}}, [](V x) { return add(x[0], x[1]); }},
      {"sub", {{4, 5}, {4, 1}}, [](V x) { return sub(x[0], x[1]); }},
      {"mul", {{3, 4, 5}, {1, 4, 1}}, [](V x) { return mul(x[0], x[1]); }},
      {"div", {{4, 5}, {4, 5}}, [](V x) { return div(x[0], add(mul(x[1], x[1]), 1.0)); }},
      {"maximum", {{4, 5}, {4, 5}}, [](V x) { return maximum(x[0], x[1]); }},
      {"minimum", {{4, 5}, {5}}, [](V x) { return minimum(x[0], x[1]); }},
      {"transposed", {{5, 4}, {4, 5}}, [](V x) { return add(transpose(x[0], 0, 1), x[1]); }},
      {"contiguous",
       {{3, 4, 5}},
       [](V x) {
         return contiguous(permute(x[0], {2, 0, 1}));
       }},
      {"to_dtype",
       {{4, 5}},
       [](V x) { return to_dtype(to_dtype(x[0], DType::Float64), DType::Float32); }},
      {"comparison",
       {{4, 5}, {4, 5}},
       [](V x) { return to_dtype(gt(x[0], x[1]), DType::Float32); },
       false},
      {"matmul", {{3, 4, 6}, {6, 5}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul_batched",
       {{2, 3, 4}, {2, 4, 5}},
       [](V x) { return matmul(x[0], transpose(transpose(x[1], 1, 2), 1, 2)); }},
      {"matmul_transposed",
       {{4, 3}, {5, 4}},
       [](V x) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 0, 1)); }},
      {"linear", {{6, 4}, {3, 4}, {3}}, [](V x) { return linear(x[0], x[1], x[2]); }},
      {"sum",
       {{3, 4, 5}},
       [](V x) {
         return sum(x[0], {0, 2});
       }},
      {"sum_strided", {{4, 5}}, [](V x) { return sum(transpose(x[0], 0, 1), {1}, true); }},
      {"sum_long", {{300, 3}}, [](V x) { return sum(x[0], {0}); }},
      {"mean_all", {{40, 50}}, [](V x) { return mean(x[0]); }},
      {"neg", {{4, 5}}, [](V x) { return neg(x[0]); }},
      {"exp_log", {{4, 5}}, [](V x) { return log(add(exp(x[0]), 1.0)); }},
      {"sqrt_rsqrt",
       {{4, 5}},
       [](V x) {
         const Tensor sq = mul(x[0], x[0]);
         return mul(sqrt(add(sq, 1.0)), rsqrt(add(sq, 2.0)));
       }},
      {"abs", {{4, 5}}, [](V x) { return abs(x[0]); }},
      {"tanh", {{4, 5}}, [](V x) { return tanh(x[0]); }},
      {"sigmoid", {{4, 5}}, [](V x) { return sigmoid(x[0]); }},
      {"relu", {{4, 5}}, [](V x) { return relu(x[0]); }},
      {"leaky_relu", {{4, 5}}, [](V x) { return leaky_relu(x[0], 0.1); }},
      {"gelu", {{4, 5}}, [](V x) { return gelu(x[0]); }},
      {"gelu_tanh", {{4, 5}}, [](V x) { return gelu(x[0], "tanh"); }},
      {"silu", {{4, 5}}, [](V x) { return silu(x[0]); }},
      {"softplus", {{4, 5}}, [](V x) { return softplus(x[0], 2.0, 1.0); }},
      {"elu", {{4, 5}}, [](V x) { return elu(x[0], 0.5); }},
      {"clamp", {{4, 5}}, [](V x) { return clamp(x[0], -0.5, 0.5); }},
      {"sin_cos", {{4, 5}}, [](V x) { return add(sin(x[0]), cos(x[0])); }},
      {"log1p_expm1", {{4, 5}}, [](V x) { return add(log1p(mul(x[0], x[0])), expm1(x[0])); }},
      {"erf", {{4, 5}}, [](V x) { return erf(x[0]); }},
      {"pow_scalar", {{4, 5}}, [](V x) { return pow(x[0], 3.0); }},
      {"where", {{4, 5}, {5}}, [](V x) { return where(gt(x[0], x[1]), x[0], x[1]); }},
      {"softmax_last", {{4, 5}}, [](V x) { return softmax(x[0], 1); }},
      {"softmax_middle", {{3, 4, 5}}, [](V x) { return softmax(x[0], 1); }},
      {"log_softmax", {{3, 4, 5}}, [](V x) { return log_softmax(x[0], -1); }},
      {"cross_entropy",
       {{4, 5}},
       [](V x) {
         const Tensor t = to(tensor<std::int64_t>({3, 0, 4, 3}), x[0].device());
         return cross_entropy(x[0], t);
       }},
      {"max_dim", {{3, 4, 5}}, [](V x) { return max(x[0], 1).first; }},
      {"argmax",
       {{3, 4, 5}},
       [](V x) { return to_dtype(argmax(transpose(x[0], 0, 2), 1), DType::Float32); },
       false},
      {"scatter_add_repeated",
       {{3, 4}, {2, 4}},
       [](V x) {
         const Tensor i = to(tensor<std::int64_t>({0, 2, 2, 0, 2, 2, 1, 0}), x[0].device());
         return scatter_add(x[0], 0, reshape(i, {2, 4}), x[1]);
       }},
      {"gather",
       {{3, 4}},
       [](V x) {
         const Tensor i = to(tensor<std::int64_t>({3, 0, 0, 1, 2, 2}), x[0].device());
         return gather(x[0], 1, reshape(i, {3, 2}));
       }},
      {"sign", {{4, 5}}, [](V x) { return sign(x[0]); }, false},
      {"int64_unary",
       {{4, 5}},
       [](V x) {
         const Tensor i = to_dtype(mul(x[0], 10.0), DType::Int64);
         return to_dtype(add(abs(i), relu(neg(i))), DType::Float32);
       },
       false},
  };
}

// Inputs drawn on the CPU, copied to the GPU, so both devices see the same values.
std::vector<Tensor> inputs_for(const OpCase& c, Device device, bool grad) {
  std::vector<Tensor> out;
  std::uint64_t seed = 1;
  for (const Shape& s : c.inputs) {
    Tensor t = to(randn(s, {.seed = seed++}), device);
    if (grad) t = Tensor(detach(t)).set_requires_grad(true);
    out.push_back(t);
  }
  return out;
}

TEST(CudaOps, EveryKernelMatchesTheCpu) {
  REMAT_SKIP_WITHOUT_GPU();
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.name);
    const auto cpu_in = inputs_for(c, Device::cpu(), c.differentiable);
    const auto gpu_in = inputs_for(c, Device::cuda(), c.differentiable);
    const Tensor cpu_out = c.fn(cpu_in), gpu_out = c.fn(gpu_in);
    EXPECT_EQ(gpu_out.device(), Device::cuda());
    EXPECT_TRUE(all_close(to(gpu_out, Device::cpu()), cpu_out, 1e-5, 1e-5));
    if (!c.differentiable) continue;
    const auto g_cpu = grad({sum(mul(cpu_out, cpu_out))}, cpu_in);
    const auto g_gpu = grad({sum(mul(gpu_out, gpu_out))}, gpu_in);
    for (std::size_t i = 0; i < g_cpu.size(); ++i) {
      EXPECT_EQ(g_gpu[i].device(), Device::cuda()) << "input " << i;
      EXPECT_TRUE(all_close(to(g_gpu[i], Device::cpu()), g_cpu[i], 1e-4, 1e-5)) << "input " << i;
    }
  }
}

TEST(CudaOps, ReplaysGiveTheSameBits) {
  REMAT_SKIP_WITHOUT_GPU();
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.name);
    const auto in = inputs_for(c, Device::cuda(), false);
    const Tensor first = c.fn(in);
    // Other buffers: a copy of each input made after the first run's allocations.
    std::vector<Tensor> again;
    for (const Tensor& t : in) again.push_back(clone(t));
    EXPECT_TRUE(bit_equal(to(c.fn(again), Device::cpu()), to(first, Device::cpu())));
  }
}

TEST(CudaDevice, CopiesElementReadsAndFactories) {
  REMAT_SKIP_WITHOUT_GPU();
  const Tensor x = arange(0, 12, 1, {.device = Device::cuda()});
  EXPECT_EQ(x.device(), Device::cuda());
  EXPECT_EQ(x.to_vector<float>(), to(x, Device::cpu()).to_vector<float>());
  EXPECT_EQ(reshape(x, {3, 4}).at<float>({2, 1}), 9.f);
  EXPECT_EQ(sum(to(x, Device::cpu())).item<float>(), 66.f);
  EXPECT_EQ(full({2, 2}, 3.5, {.device = Device::cuda()}).to_vector<float>(),
            std::vector<float>(4, 3.5f));
  const Tensor t = to(tensor<double>({1.5, -2.0}), Device::cuda());
  EXPECT_EQ(to(t, Device::cpu()).to_vector<double>(), (std::vector<double>{1.5, -2.0}));
  // The gradient of a copy flows back to the input's device.
  const Tensor leaf = Tensor(randn({3})).set_requires_grad(true);
  const auto g = grad({sum(mul(to(leaf, Device::cuda()), 2.0))}, {leaf});
  EXPECT_EQ(g[0].device(), Device::cpu());
  EXPECT_EQ(g[0].to_vector<float>(), std::vector<float>(3, 2.f));
  EXPECT_TRUE(testing::throws_with([&] { x.set<float>({0}, 1.f); }, {"CPU tensor", "cuda:0"}));
}

// The fused SGD update with momentum, weight decay and Nesterov on both devices.
TEST(CudaOps, SgdStepMatchesTheCpu) {
  REMAT_SKIP_WITHOUT_GPU();
  const SgdStepParams p{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
  std::vector<float> result[2];
  for (int d = 0; d < 2; ++d) {
    const Device dev = d == 0 ? Device::cpu() : Device::cuda();
    const Tensor param = to(randn({33, 7}, {.seed = 1}), dev);
    const Tensor buf = to(randn({33, 7}, {.seed = 2}), dev);
    const Tensor g = to(randn({33, 7}, {.seed = 3}), dev);
    sgd_step_(param, buf, g, p);
    sgd_step_(param, buf, g, p);
    EXPECT_EQ(param.device(), dev);
    result[d] = to(param, Device::cpu()).to_vector<float>();
    for (float v : to(buf, Device::cpu()).to_vector<float>()) result[d].push_back(v);
  }
  ASSERT_EQ(result[0].size(), result[1].size());
  for (std::size_t i = 0; i < result[0].size(); ++i)
    EXPECT_NEAR(result[0][i], result[1][i], 1e-5) << "element " << i;
}

// Every in-place kind, through a transposed view of self and with broadcast operands.
TEST(CudaOps, InplaceOpsMatchTheCpu) {
  REMAT_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::function<void(const Tensor&, const Tensor&)>>>
      cases = {
          {"add_", [](const Tensor& s, const Tensor& o) { add_(s, o, 0.5); }},
          {"add_scalar", [](const Tensor& s, const Tensor&) { add_(s, 2.0); }},
          {"mul_", [](const Tensor& s, const Tensor& o) { mul_(s, o); }},
          {"mul_scalar", [](const Tensor& s, const Tensor&) { mul_(s, -3.0); }},
          {"div_", [](const Tensor& s, const Tensor& o) { div_(s, add(mul(o, o), 1.0)); }},
          {"addcmul_", [](const Tensor& s, const Tensor& o) { addcmul_(s, o, o, 0.25); }},
          {"addcdiv_",
           [](const Tensor& s, const Tensor& o) { addcdiv_(s, o, add(mul(o, o), 1.0), 2.0); }},
          {"fill_", [](const Tensor& s, const Tensor&) { fill_(s, 1.5); }},
          {"copy_",
           [](const Tensor& s, const Tensor& o) { copy_(s, to_dtype(o, DType::Float64)); }},
      };
  for (const auto& [name, fn] : cases) {
    SCOPED_TRACE(name);
    std::vector<float> result[2];
    for (int d = 0; d < 2; ++d) {
      const Device dev = d == 0 ? Device::cpu() : Device::cuda();
      const Tensor base = to(randn({5, 4}, {.seed = 1}), dev);
      const Tensor other = to(randn({5}, {.seed = 2}), dev);  // broadcasts over the view's rows
      fn(transpose(base, 0, 1), other);
      result[d] = to(base, Device::cpu()).to_vector<float>();
    }
    ASSERT_EQ(result[0].size(), result[1].size());
    for (std::size_t i = 0; i < result[0].size(); ++i)
      EXPECT_NEAR(result[0][i], result[1][i], 1e-5) << "element " << i;
  }
}

// A model moved with Module::to trains on the GPU with nn::SGD (its first step unfused, then the
// fused step) as on the CPU, also through a single-process DistributedDataParallel.
TEST(CudaModels, ModuleToAndSgdMatchTheCpu) {
  REMAT_SKIP_WITHOUT_GPU();
  std::vector<float> result[2];
  for (int d = 0; d < 2; ++d) {
    const Device dev = d == 0 ? Device::cpu() : Device::cuda();
    manual_seed(7);
    auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(6, 16),
                                                  std::make_shared<nn::ReLU>(),
                                                  std::make_shared<nn::Linear>(16, 3));
    model->to(dev);
    for (const auto& [name, p] : model->named_parameters()) {
      EXPECT_EQ(p.device(), dev) << name;
      EXPECT_TRUE(p.requires_grad()) << name;
    }
    dist::DistributedDataParallel ddp(model, dist::init());
    nn::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
    const Tensor x = to(randn({32, 6}, {.seed = 3}), dev);
    const Tensor y = to(tensor<std::int64_t>(std::vector<std::int64_t>(32, 2)), dev);
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      backward(cross_entropy(ddp(x), y));
      opt.step();
    }
    for (const auto& p : model->parameters())
      for (float v : to(p, Device::cpu()).to_vector<float>()) result[d].push_back(v);
  }
  ASSERT_EQ(result[0].size(), result[1].size());
  for (std::size_t i = 0; i < result[0].size(); ++i)
    EXPECT_NEAR(result[0][i], result[1][i], 1e-5) << "value " << i;
}

// Bad targets and indices are errors naming them on the GPU too, and the pool carries on.
TEST(CudaOps, BadIndicesAreErrors) {
  REMAT_SKIP_WITHOUT_GPU();
  const Tensor x = to(randn({2, 3}), Device::cuda());
  EXPECT_TRUE(testing::throws_with(
      [&] {
        cross_entropy(x, to(tensor<std::int64_t>({1, 7}), Device::cuda()));
      },
      {"target 7 at position 1", "3 classes"}));
  EXPECT_TRUE(testing::throws_with(
      [&] {
        gather(x, 1, reshape(to(tensor<std::int64_t>({0, -1}), Device::cuda()), {2, 1}));
      },
      {"gather", "out of range", "size 3"}));
  EXPECT_TRUE(testing::throws_with(
      [&] {
        scatter_add(x, 1, reshape(to(tensor<std::int64_t>({0, 5}), Device::cuda()), {2, 1}), x);
      },
      {"scatter_add", "out of range", "size 3"}));
  EXPECT_EQ(sum(add(x, 1.0)).device(), Device::cuda());
}

// The device pool runs on the segment allocator: whole segments are held (and counted), a
// request the device cannot serve is an OutOfBudget, and the pool carries on after it.
TEST(CudaMemory, SegmentsAndOutOfMemory) {
  REMAT_SKIP_WITHOUT_GPU();
  Pool& pool = Pool::of(Device::cuda());
  const Tensor a = zeros({1000}, {.device = Device::cuda()});
  const DtrStats s = pool.stats();
  EXPECT_GE(s.held_bytes, std::size_t{2} << 20);
  EXPECT_EQ(s.held_bytes - s.fragmentation_bytes, pool.resident_bytes());
  // 4 TiB: more than any device has.
  EXPECT_THROW(zeros({std::int64_t{1} << 40}, {.device = Device::cuda()}), OutOfBudget);
  EXPECT_EQ(add(a, 1.0).to_vector<float>(), std::vector<float>(1000, 1.f));
}

// A few steps of a two-layer perceptron on the GPU, with plain SGD written in ops: every loss
// and the final weights have the same bits under half the unbudgeted peak as without a budget.
// The budget counts held bytes (whole segments); the peak is the tensors' (resident).
std::vector<float> train_mlp_on_gpu(std::optional<double> fraction, std::size_t* peak) {
  Pool& pool = Pool::of(Device::cuda());
  DtrConfig cfg;
  cfg.cost = CostModel::Flops;
  if (fraction) cfg.budget = static_cast<std::size_t>(*fraction * static_cast<double>(*peak));
  pool.configure(cfg);
  pool.reset_stats();
  const Device gpu = Device::cuda();
  // Activations of 16 MiB each: large requests take segments of their own size, so half the
  // peak is not a budget smaller than the segments the tensors need.
  Tensor w1 = to(mul(randn({1024, 32}, {.seed = 1}), 0.1), gpu);
  Tensor w2 = to(mul(randn({8, 1024}, {.seed = 2}), 0.1), gpu);
  std::vector<float> out;
  for (int step = 0; step < 4; ++step) {
    w1.set_requires_grad(true), w2.set_requires_grad(true);
    const Tensor x = to(randn({4096, 32}, {.seed = 10u + step}), gpu);
    const Tensor y = to(randn({4096, 8}, {.seed = 20u + step}), gpu);
    Tensor h = linear(x, w1);
    for (int layer = 0; layer < 6; ++layer) h = maximum(add(h, mul(h, 0.5)), mul(h, 0.01));
    const Tensor d = sub(linear(h, w2), y);
    const Tensor loss = sum(mul(d, d));
    const auto g = grad({loss}, {w1, w2});
    out.push_back(loss.item<float>());
    w1 = detach(sub(w1, mul(g[0], 1e-6)));
    w2 = detach(sub(w2, mul(g[1], 1e-6)));
  }
  for (float v : w2.to_vector<float>()) out.push_back(v);
  if (!fraction) *peak = pool.stats().peak_resident_bytes;
  pool.configure(DtrConfig{});
  return out;
}

TEST(CudaMemory, BudgetedTrainingIsBitIdentical) {
  REMAT_SKIP_WITHOUT_GPU();
  std::size_t peak = 0;
  const auto plain = train_mlp_on_gpu(std::nullopt, &peak);
  ASSERT_GT(peak, 0u);
  const auto budgeted = train_mlp_on_gpu(0.5, &peak);
  EXPECT_GT(Pool::of(Device::cuda()).total_stats().evictions, 0u);
  ASSERT_EQ(plain.size(), budgeted.size());
  for (std::size_t i = 0; i < plain.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(plain[i]), std::bit_cast<std::uint32_t>(budgeted[i]))
        << "value " << i;
}

// Without a GPU the backend says so, and asking for one is an error naming what is missing.
TEST(CudaDevice, NoGpuIsAClearError) {
  if (cuda::available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(cuda::unavailable_reason().empty());
  EXPECT_TRUE(testing::throws_with([] { to(zeros({2}), Device::cuda()); }, {"no CUDA device"}));
}

}  // namespace
}  // namespace remat
