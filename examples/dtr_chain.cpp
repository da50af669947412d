// The sqrt(N) demo of the DTR paper: an N-layer linear chain of equal-size, unit-cost ops run
// forward and backward under a budget of B tensors.  The chain's op is user code written through
// the same public Op registration the framework's own ops use (examples/common/chain_ops.h).
// Usage: dtr_chain --length 1024 --budget-tensors 64 --heuristic estar
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "examples/common/chain_ops.h"
#include "examples/common/flag_checks.h"

using namespace remat;
using examples::kElements;

int main(int argc, char** argv) {
  CLI::App app{"Linear-chain DTR demo (the paper's sqrt(N) bound)"};
  std::int64_t length = 1024, budget_tensors = 64;
  std::string heuristic = "estar", policy = "eager-evict";
  std::uint64_t seed = 0;
  std::size_t sample = 0;
  app.add_option("--length", length, "number of ops N")
      ->check(examples::whole_in_range<std::int64_t>(1, 1'000'000'000));
  app.add_option("--budget-tensors", budget_tensors, "budget B, in tensors")
      ->check(examples::whole_in_range<std::int64_t>(1, 1'000'000'000));
  app.add_option("--heuristic", heuristic, "eviction heuristic");
  app.add_option("--policy", policy, "deallocation policy");
  app.add_option("--seed", seed, "seed for sampling and the random heuristic")
      ->check(
          examples::whole_in_range<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max()));
  app.add_option("--sample", sample,
                 "candidates scored per eviction (0: the pool's default, max(256, 2 sqrt(n)))")
      ->check(examples::whole_in_range<std::size_t>(0, 1'000'000'000));
  CLI11_PARSE(app, argc, argv);

  const std::size_t tensor_bytes = kElements * sizeof(float);
  Pool& pool = Pool::of(Device::cpu());
  try {
    DtrConfig cfg;
    cfg.heuristic = heuristic_from_name(heuristic);
    cfg.policy = policy_from_name(policy);
    cfg.cost = CostModel::Unit;
    cfg.seed = seed;
    cfg.sample = sample;
    pool.configure(cfg);
    Tensor x = tensor<float>(std::vector<float>(kElements, 1.0f)).set_requires_grad(true);
    pool.set_budget(static_cast<std::size_t>(budget_tensors) * tensor_bytes);
    pool.reset_stats();
    const auto& op = examples::chain_op();
    Tensor t = x;
    for (std::int64_t i = 0; i < length; ++i) t = call1(op, {t});
    backward({t}, {ones({kElements})});
    const DtrStats s = pool.stats();
    nlohmann::json out = {
        {"length", length},
        {"budget_tensors", budget_tensors},
        {"heuristic", heuristic},
        {"policy", policy},
        {"executions", s.executions},
        {"rematerializations", s.rematerializations},
        {"evictions", s.evictions},
        {"executions_per_op", static_cast<double>(s.executions) / static_cast<double>(length)},
        {"peak_resident_tensors",
         static_cast<double>(s.peak_resident_bytes) / static_cast<double>(tensor_bytes)},
        {"metadata_accesses", s.metadata_accesses},
        {"gradient_ok", std::abs(x.grad().at<float>({0}) -
                                 std::ldexp(1.0f, -static_cast<int>(std::min<std::int64_t>(
                                                      length, 149)))) <= 1e-30f},
    };
    std::printf("%s\n", out.dump().c_str());
  } catch (const OutOfBudget& e) {
    std::fprintf(stderr, "dtr_chain: a budget of %lld tensors is too small for this chain: %s\n",
                 static_cast<long long>(budget_tensors), e.what());
    return 1;
  } catch (const std::exception& e) {  // remat::Error, std::bad_alloc, ...
    std::fprintf(stderr, "dtr_chain: %s\n", e.what());
    return 1;
  }
  return 0;
}
