// Test helpers shared by every suite: closeness checks that print the numbers involved, the
// PyTorch fixture loader, and float64 finite-difference checks of first and second derivatives.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "remat.h"

namespace remat {
class Cell;
}  // namespace remat

namespace remat::testing {

// Fails (with the worst element, its index and both values) unless
// |actual - expected| <= atol + rtol * |expected| everywhere and the shapes agree.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected,
                                     double rtol = 1e-5, double atol = 1e-6);
::testing::AssertionResult bit_equal(const Tensor& a, const Tensor& b);

// The pool cell behind a tensor's storage; throws remat::Error if the storage is not one.
Cell& cell_of(const Tensor& t);

// Succeeds when f throws remat::Error whose message contains every fragment (op name, shapes).
::testing::AssertionResult throws_with(const std::function<void()>& f,
                                       std::vector<std::string> fragments);
// A file path in the temporary directory unique to this process and the running test, so test
// processes that ctest runs in parallel never share a file: <tmp>/<stem>_<pid>_<test><ext>.
std::string unique_temp_path(const std::string& stem, const std::string& ext);

// A command run through the shell, stderr folded into stdout.
struct CommandResult {
  int status = 0;  // as pclose returns it: 0 on success
  std::string output;
};
CommandResult run_command(const std::string& command);
// "mpirun -np N --oversubscribe", allowed to run as root (containers and CI often are); empty,
// with the reason in *why, when this build has no MPI backend or mpirun is not installed.
std::string mpirun_prefix(int ranks, std::string* why);

// A case of a fixture file written by tests/fixtures/generate.py: named tensors and attributes.
struct FixtureCase {
  std::string name;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> numbers;
  std::map<std::string, std::vector<std::int64_t>> lists;
  const Tensor& operator[](const std::string& key) const;
  double num(const std::string& key) const;
  std::vector<std::int64_t> list(const std::string& key) const;
};
// Loads tests/fixtures/data/<file>.json; throws when missing.
std::vector<FixtureCase> load_fixture(const std::string& file);
const FixtureCase& find_case(const std::vector<FixtureCase>& cases, const std::string& name);

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Compares autograd gradients of sum(fn(inputs) * w) (w a fixed random weight) with central
// finite differences in float64.  Inputs must be float64 leaves that require grad.
::testing::AssertionResult gradcheck(const Fn& fn, const std::vector<Tensor>& inputs,
                                     double eps = 1e-6, double atol = 1e-5, double rtol = 1e-4);
// The same for second derivatives: differentiates <grad(sum(fn * w)), v> with create_graph and
// compares with finite differences of the first derivative.
::testing::AssertionResult gradgradcheck(const Fn& fn, const std::vector<Tensor>& inputs,
                                         double eps = 1e-6, double atol = 1e-4, double rtol = 1e-3);

// A float64 leaf with values uniform in [low, high), requiring grad.
Tensor leaf64(const Shape& shape, std::uint64_t seed, double low = -1, double high = 1);

// Configures the CPU pool for the scope of a test and restores the default configuration when
// it ends, also when the test throws (an OutOfBudget from a budget too small).
class ScopedPoolConfig {
 public:
  explicit ScopedPoolConfig(const DtrConfig& config) { Pool::of(Device::cpu()).configure(config); }
  // A heuristic and policy with the flops cost model: eviction choices that do not depend on
  // measured times, so a run's replays are the same every time.
  ScopedPoolConfig(Heuristic heuristic, DeallocPolicy policy)
      : ScopedPoolConfig(deterministic(heuristic, policy)) {}
  ~ScopedPoolConfig() { Pool::of(Device::cpu()).configure(DtrConfig{}); }
  ScopedPoolConfig(const ScopedPoolConfig&) = delete;
  ScopedPoolConfig& operator=(const ScopedPoolConfig&) = delete;

 private:
  static DtrConfig deterministic(Heuristic heuristic, DeallocPolicy policy) {
    DtrConfig c;
    c.heuristic = heuristic;
    c.policy = policy;
    c.cost = CostModel::Flops;
    return c;
  }
};

}  // namespace remat::testing
