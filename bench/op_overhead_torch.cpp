// libtorch's half of bench/op_overhead.sh: the chains of op_overhead.cpp written with libtorch
// (Debian's libtorch-dev), same sizes, same output format.  Built only when libtorch is found;
// the framework itself never links it.
// Usage: op_overhead_torch 200000 5
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "bench/timing.h"

using bench::median_us_per_op;

int main(int argc, char** argv) {
  const std::int64_t ops = argc > 1 ? std::atoll(argv[1]) : 200000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  if (ops < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: op_overhead_torch [ops >= 1] [rounds >= 1]\n");
    return 2;
  }
  torch::set_num_threads(1);
  const torch::Tensor c = torch::full({4}, 1.0001);
  auto add_fwd = [&] {
    torch::NoGradGuard no_grad;
    torch::Tensor x = torch::ones({4});
    for (std::int64_t i = 0; i < ops; ++i) x = torch::add(x, c);
    (void)x.sum().item<float>();
  };
  auto chain_bwd = [&](bool multiply) {
    return [&, multiply] {
      torch::Tensor x0 = torch::ones({4}).set_requires_grad(true);
      torch::Tensor x = x0;
      for (std::int64_t i = 0; i < ops; ++i) x = multiply ? torch::mul(x, c) : torch::add(x, c);
      x.sum().backward();
      (void)x0.grad().sum().item<float>();
    };
  };
  add_fwd();
  std::printf("add_fwd %.4f\n", median_us_per_op(rounds, ops, add_fwd));
  std::printf("add_fwd_bwd %.4f\n", median_us_per_op(rounds, ops, chain_bwd(false)));
  std::printf("mul_fwd_bwd %.4f\n", median_us_per_op(rounds, ops, chain_bwd(true)));
  return 0;
}
