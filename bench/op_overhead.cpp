// The fixed cost of one op call, ours (this file) beside libtorch (op_overhead_torch.cpp, the
// same chains written with libtorch); bench/op_overhead.sh runs both and prints the ratios.
// Chains of `ops` calls on 4-element float tensors, one thread:
//   add_fwd        x = x + c, no autograd
//   add_fwd_bwd    the same with x0 requiring grad, then backward (forward + backward per op)
//   mul_fwd_bwd    x = x * c, which saves its input: every intermediate stays alive until backward
// and, ours only, the two autograd chains again with a budget set far above the peak
// (`*_budget_unbound`) and at half of the unbudgeted peak (`mul_fwd_bwd_budget0.5`: evictions and
// recomputation).  Prints "NAME us_per_op" per chain: the median of `rounds` runs.
// Usage: op_overhead --ops 200000 --rounds 5 [--only add_fwd]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "remat.h"

using namespace remat;

using bench::median_us_per_op;

int main(int argc, char** argv) {
  CLI::App app{"per-op overhead of the dispatch path"};
  std::int64_t ops = 200000;
  int rounds = 5;
  app.add_option("--ops", ops, "calls per chain")->check(CLI::Range(1, 100000000));
  app.add_option("--rounds", rounds, "runs per chain (the median is printed)")
      ->check(CLI::Range(1, 1000));
  std::string only;
  app.add_option("--only", only, "run only the chains whose name starts with this (for profiling)");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure as soon as it is measured
  set_num_threads(1);
  Pool& pool = Pool::of(Device::cpu());
  const Tensor c = full({4}, 1.0001);

  auto add_fwd = [&] {
    NoGradGuard no_grad;
    Tensor x = ones({4});
    for (std::int64_t i = 0; i < ops; ++i) x = add(x, c);
    (void)sum(x).item<float>();
  };
  auto chain_bwd = [&](bool multiply) {
    return [&, multiply] {
      Tensor x0 = ones({4}).set_requires_grad(true);
      Tensor x = x0;
      for (std::int64_t i = 0; i < ops; ++i) x = multiply ? mul(x, c) : add(x, c);
      backward(sum(x));
      (void)sum(x0.grad()).item<float>();
    };
  };
  auto report = [&](const char* name, const std::function<void()>& chain) {
    if (std::string_view(name).starts_with(only))
      std::printf("%s %.4f\n", name, median_us_per_op(rounds, ops, chain));
  };
  add_fwd();  // warm the allocator's cache and the kernel-time table
  report("add_fwd", add_fwd);
  report("add_fwd_bwd", chain_bwd(false));
  pool.reset_peak();
  chain_bwd(true)();  // the peak the budgeted chains take fractions of, whatever runs
  const std::size_t peak = pool.peak_resident_bytes();
  report("mul_fwd_bwd", chain_bwd(true));

  pool.set_budget(std::size_t{64} << 30);
  report("add_fwd_budget_unbound", add_fwd);
  report("add_fwd_bwd_budget_unbound", chain_bwd(false));
  report("mul_fwd_bwd_budget_unbound", chain_bwd(true));
  pool.set_budget(peak / 2);
  pool.reset_stats();
  report("mul_fwd_bwd_budget0.5", chain_bwd(true));
  const DtrStats s = pool.stats();
  std::printf(
      "# budget0.5: peak %zu of budget %zu bytes (unbudgeted peak %zu), %llu evictions, "
      "%llu recomputed ops, search %.3f s, bookkeeping %.3f s over %d rounds\n",
      static_cast<std::size_t>(s.peak_resident_bytes), peak / 2, peak,
      static_cast<unsigned long long>(s.evictions),
      static_cast<unsigned long long>(s.rematerializations), s.search_seconds,
      s.bookkeeping_seconds, rounds);
  pool.set_budget(std::nullopt);
  return 0;
}
