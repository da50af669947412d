// GFLOP/s of the oneDNN-backed ops on one thread: matmul (through remat::matmul and, as the
// ceiling, the raw oneDNN sgemm it calls) and conv2d forward / backward on ResNet-like shapes;
// GB/s of element-wise and row-wise kernels (BM_RowOp).
// Usage: ops_bench --benchmark_min_time=0.5 [--benchmark_filter=Conv2d]
#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ops/conv.h"
#include "ops/cpu/onednn.h"
#include "ops/linalg.h"
#include "remat.h"

namespace {

using remat::Tensor;

// The "GFLOP/s" counter: `gflop` per iteration, divided by the measured time.
void set_rate(benchmark::State& state, double gflop_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      gflop_per_iteration * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_Matmul(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Tensor a = remat::randn({n, n}, {.seed = 1}), b = remat::randn({n, n}, {.seed = 2});
  for (auto _ : state) {
    Tensor c = remat::matmul(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  set_rate(state, 2e-9 * static_cast<double>(n * n * n));
}
BENCHMARK(BM_Matmul)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);

// The same product straight into oneDNN's sgemm, without the framework around it.
void BM_RawSgemm(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  for (auto _ : state) {
    remat::detail::sgemm(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  set_rate(state, 2e-9 * static_cast<double>(n * n * n));
}
BENCHMARK(BM_RawSgemm)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);

// ResNet-like 3x3 convolutions, batch 32: {channels in, channels out, height = width, stride}.
struct ConvShape {
  std::int64_t c, o, hw, stride;
};
const ConvShape kConvShapes[] = {{16, 16, 32, 1}, {32, 32, 16, 1}, {64, 64, 8, 1}, {16, 32, 32, 2}};
constexpr std::int64_t kBatch = 32;

struct ConvProblem {
  Tensor x, w, b, gy;
  remat::Conv2dOptions opts;
  double gflop;  // one direction (forward, backward-input or backward-weight)
  explicit ConvProblem(const ConvShape& s) {
    opts = {.stride = s.stride, .padding = 1};
    x = remat::randn({kBatch, s.c, s.hw, s.hw}, {.seed = 3});
    w = remat::randn({s.o, s.c, 3, 3}, {.seed = 4});
    b = remat::randn({s.o}, {.seed = 5});
    const std::int64_t oh = (s.hw + 2 - 3) / s.stride + 1;
    gy = remat::randn({kBatch, s.o, oh, oh}, {.seed = 6});
    gflop = 2e-9 * static_cast<double>(kBatch * s.o * oh * oh * s.c * 9);
  }
};

void label(benchmark::State& state, const ConvShape& s) {
  state.SetLabel(
      fmt::format("N={} {}->{} {}x{} 3x3 stride {}", kBatch, s.c, s.o, s.hw, s.hw, s.stride));
}

void BM_Conv2dForward(benchmark::State& state) {
  const ConvShape& s = kConvShapes[state.range(0)];
  ConvProblem p(s);
  for (auto _ : state) {
    Tensor y = remat::conv2d(p.x, p.w, p.b, p.opts);
    benchmark::DoNotOptimize(y.impl());
  }
  set_rate(state, p.gflop);
  label(state, s);
}
BENCHMARK(BM_Conv2dForward)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

// Both gradients of a training step: w.r.t. the input and w.r.t. the weight.
void BM_Conv2dBackward(benchmark::State& state) {
  const ConvShape& s = kConvShapes[state.range(0)];
  ConvProblem p(s);
  for (auto _ : state) {
    Tensor gx = remat::conv2d_backward_input(p.gy, p.w, p.x.shape(), p.opts);
    Tensor gw = remat::conv2d_backward_weight(p.x, p.gy, p.w.shape(), p.opts);
    benchmark::DoNotOptimize(gx.impl());
    benchmark::DoNotOptimize(gw.impl());
  }
  set_rate(state, 2 * p.gflop);
  label(state, s);
}
BENCHMARK(BM_Conv2dBackward)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

void BM_Conv2dBackwardInput(benchmark::State& state) {
  const ConvShape& s = kConvShapes[state.range(0)];
  ConvProblem p(s);
  for (auto _ : state) {
    Tensor gx = remat::conv2d_backward_input(p.gy, p.w, p.x.shape(), p.opts);
    benchmark::DoNotOptimize(gx.impl());
  }
  set_rate(state, p.gflop);
  label(state, s);
}
BENCHMARK(BM_Conv2dBackwardInput)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

void BM_Conv2dBackwardWeight(benchmark::State& state) {
  const ConvShape& s = kConvShapes[state.range(0)];
  ConvProblem p(s);
  for (auto _ : state) {
    Tensor gw = remat::conv2d_backward_weight(p.x, p.gy, p.w.shape(), p.opts);
    benchmark::DoNotOptimize(gw.impl());
  }
  set_rate(state, p.gflop);
  label(state, s);
}
BENCHMARK(BM_Conv2dBackwardWeight)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

// Element-wise and row-wise kernels on a [1024, 1024] float tensor (a Transformer LM's FFN
// activation): GB/s of the bytes each op must read and write at least once.
const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>>
    kRowOps = {
        {"add", [](const Tensor& a, const Tensor& b) { return remat::add(a, b); }},
        {"mul_scalar", [](const Tensor& a, const Tensor&) { return remat::mul(a, 0.5); }},
        {"relu", [](const Tensor& a, const Tensor&) { return remat::relu(a); }},
        {"sqrt", [](const Tensor& a, const Tensor&) { return remat::sqrt(remat::abs(a)); }},
        {"exp", [](const Tensor& a, const Tensor&) { return remat::exp(a); }},
        {"tanh", [](const Tensor& a, const Tensor&) { return remat::tanh(a); }},
        {"gelu", [](const Tensor& a, const Tensor&) { return remat::gelu(a); }},
        {"softmax", [](const Tensor& a, const Tensor&) { return remat::softmax(a, -1); }},
        {"log_softmax", [](const Tensor& a, const Tensor&) { return remat::log_softmax(a, -1); }},
        {"sum_rows", [](const Tensor& a, const Tensor&) { return remat::sum(a, {0}); }},
        {"sum_cols", [](const Tensor& a, const Tensor&) { return remat::sum(a, {1}); }},
};

void BM_RowOp(benchmark::State& state) {
  const auto& [name, fn] = kRowOps[state.range(0)];
  const Tensor a = remat::randn({1024, 1024}, {.seed = 7}),
               b = remat::randn({1024, 1024}, {.seed = 8});
  std::int64_t bytes = 0;
  for (auto _ : state) {
    Tensor y = fn(a, b);
    bytes = a.numel() * 4 * (name == "add" ? 2 : 1) + y.numel() * 4;
    benchmark::DoNotOptimize(y.impl());
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bytes) * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
  state.SetLabel(name);
}
BENCHMARK(BM_RowOp)
    ->DenseRange(0, static_cast<int>(kRowOps.size()) - 1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  remat::ensure_thread_policy(argc, argv);
  remat::set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
