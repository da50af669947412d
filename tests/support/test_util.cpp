#include "support/test_util.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "dist/communicator.h"
#include "dtr/cell.h"

namespace remat::testing {

Cell& cell_of(const Tensor& t) {
  auto* cell = dynamic_cast<Cell*>(t.storage().get());
  if (!cell) throw Error("tensor storage is not a pool cell");
  return *cell;
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol,
                                     double atol) {
  if (!actual.defined() || !expected.defined())
    return ::testing::AssertionFailure() << "undefined tensor";
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure()
           << "shape " << actual.shape_str() << " != expected " << expected.shape_str();
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  double worst = 0;
  std::size_t worst_i = 0;
  bool bad = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double tol = atol + rtol * std::abs(e[i]);
    const double err = std::abs(a[i] - e[i]);
    const bool same_nan = std::isnan(a[i]) && std::isnan(e[i]);
    const bool same_inf = std::isinf(a[i]) && a[i] == e[i];
    if (same_nan || same_inf) continue;
    if (!(err <= tol)) {
      if (!bad || err / tol > worst) worst = err / tol, worst_i = i;
      bad = true;
    }
  }
  if (!bad) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_i << " of shape " << actual.shape_str() << ": got " << a[worst_i]
         << ", expected " << e[worst_i] << " (|diff| " << std::abs(a[worst_i] - e[worst_i])
         << ", rtol " << rtol << ", atol " << atol << ")";
}

::testing::AssertionResult bit_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure()
           << "shape/dtype differ: " << a.shape_str() << " vs " << b.shape_str();
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

std::string unique_temp_path(const std::string& stem, const std::string& ext) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "none";
  for (char& c : test)
    if (c == '/') c = '_';
  return ::testing::TempDir() + stem + "_" + std::to_string(::getpid()) + "_" + test + ext;
}

CommandResult run_command(const std::string& command) {
  CommandResult r;
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw Error("cannot run " + command);
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) r.output += buf;
  r.status = pclose(pipe);
  return r;
}

std::string mpirun_prefix(int ranks, std::string* why) {
  if (!dist::has_mpi()) {
    *why = "remat was built without MPI (apt install libopenmpi-dev, then rebuild)";
    return "";
  }
  if (run_command("command -v mpirun").status != 0) {
    *why = "mpirun is not installed (apt install openmpi-bin)";
    return "";
  }
  // Open MPI keeps allocations until exit in plugins it unloads at MPI_Finalize, where
  // LeakSanitizer can no longer name them: leak checks stay with the one-process runs.
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
         "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\" mpirun -np " +
         std::to_string(ranks) + " --oversubscribe";
}

::testing::AssertionResult throws_with(const std::function<void()>& f,
                                       std::vector<std::string> fragments) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& frag : fragments)
      if (msg.find(frag) == std::string::npos)
        return ::testing::AssertionFailure()
               << "message \"" << msg << "\" lacks \"" << frag << "\"";
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error thrown";
}

const Tensor& FixtureCase::operator[](const std::string& key) const {
  auto it = tensors.find(key);
  if (it == tensors.end()) throw Error(fmt::format("fixture case {}: no tensor '{}'", name, key));
  return it->second;
}
double FixtureCase::num(const std::string& key) const {
  auto it = numbers.find(key);
  if (it == numbers.end()) throw Error(fmt::format("fixture case {}: no number '{}'", name, key));
  return it->second;
}
std::vector<std::int64_t> FixtureCase::list(const std::string& key) const {
  auto it = lists.find(key);
  if (it == lists.end()) throw Error(fmt::format("fixture case {}: no list '{}'", name, key));
  return it->second;
}

namespace {
Tensor tensor_from_json(const nlohmann::json& j) {
  Shape shape = j.at("shape").get<Shape>();
  const std::string dtype = j.at("dtype");
  const auto& data = j.at("data");
  if (dtype == "int64") return tensor<std::int64_t>(data.get<std::vector<std::int64_t>>(), shape);
  // Non-finite values are stored as strings ("nan", "inf", "-inf").
  std::vector<double> values;
  values.reserve(data.size());
  for (const auto& v : data)
    values.push_back(v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>());
  if (dtype == "float64") return tensor<double>(values, shape);
  std::vector<float> f(values.begin(), values.end());
  return tensor<float>(f, shape);
}
}  // namespace

std::vector<FixtureCase> load_fixture(const std::string& file) {
  const std::string path = std::string(REMAT_FIXTURE_DIR) + "/" + file + ".json";
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("fixture {} not found; run tests/fixtures/generate.py", path));
  const auto j = nlohmann::json::parse(in);
  std::vector<FixtureCase> cases;
  for (const auto& c : j.at("cases")) {
    FixtureCase fc;
    fc.name = c.at("name");
    for (const auto& [k, v] : c.items()) {
      if (k == "name") continue;
      if (v.is_object())
        fc.tensors[k] = tensor_from_json(v);
      else if (v.is_number())
        fc.numbers[k] = v.get<double>();
      else if (v.is_boolean())
        fc.numbers[k] = v.get<bool>() ? 1 : 0;
      else if (v.is_array())
        fc.lists[k] = v.get<std::vector<std::int64_t>>();
      else if (v.is_string() && (v == "nan" || v == "inf" || v == "-inf"))
        fc.numbers[k] = std::stod(v.get<std::string>());  // a non-finite number
    }
    cases.push_back(std::move(fc));
  }
  return cases;
}

const FixtureCase& find_case(const std::vector<FixtureCase>& cases, const std::string& name) {
  for (const auto& c : cases)
    if (c.name == name) return c;
  throw Error(fmt::format("fixture case '{}' not found", name));
}

Tensor leaf64(const Shape& shape, std::uint64_t seed, double low, double high) {
  return uniform(shape, low, high, {.dtype = DType::Float64, .requires_grad = true, .seed = seed});
}

namespace {

Tensor weighted_sum(const Fn& fn, const std::vector<Tensor>& inputs, Tensor& weight) {
  Tensor out = fn(inputs);
  if (!weight.defined())
    weight = uniform(out.shape(), 0.5, 1.5, {.dtype = out.dtype(), .seed = 12345});
  return sum(mul(out, weight));
}

// Central differences of scalar(inputs) with respect to every element of every input.
std::vector<std::vector<double>> numeric_grads(
    const std::function<double(const std::vector<Tensor>&)>& scalar,
    const std::vector<Tensor>& inputs, double eps) {
  std::vector<std::vector<double>> grads;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    std::vector<double> g(inputs[k].numel());
    auto base = inputs[k].to_vector<double>();
    for (std::size_t i = 0; i < base.size(); ++i) {
      auto eval = [&](double delta) {
        auto values = base;
        values[i] += delta;
        std::vector<Tensor> in = inputs;
        in[k] = tensor<double>(values, inputs[k].shape());
        return scalar(in);
      };
      g[i] = (eval(eps) - eval(-eps)) / (2 * eps);
    }
    grads.push_back(std::move(g));
  }
  return grads;
}

::testing::AssertionResult compare(const std::vector<Tensor>& analytic,
                                   const std::vector<std::vector<double>>& numeric,
                                   const std::vector<Tensor>& inputs, double atol, double rtol,
                                   const char* what) {
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const std::vector<double> a = analytic[k].defined()
                                      ? analytic[k].to_vector<double>()
                                      : std::vector<double>(numeric[k].size(), 0.0);
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double n = numeric[k][i];
      if (!(std::abs(a[i] - n) <= atol + rtol * std::abs(n)))
        return ::testing::AssertionFailure()
               << what << " of input " << k << " (shape " << inputs[k].shape_str() << "), element "
               << i << ": autograd " << a[i] << ", finite differences " << n;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

::testing::AssertionResult gradcheck(const Fn& fn, const std::vector<Tensor>& inputs, double eps,
                                     double atol, double rtol) {
  Tensor weight;
  Tensor y = weighted_sum(fn, inputs, weight);
  auto analytic = grad({y}, inputs, {}, false, false, true);
  auto numeric = numeric_grads(
      [&](const std::vector<Tensor>& in) {
        NoGradGuard ng;
        return weighted_sum(fn, in, weight).item<double>();
      },
      inputs, eps);
  return compare(analytic, numeric, inputs, atol, rtol, "gradient");
}

::testing::AssertionResult gradgradcheck(const Fn& fn, const std::vector<Tensor>& inputs,
                                         double eps, double atol, double rtol) {
  Tensor weight;
  std::vector<Tensor> directions;
  for (std::size_t k = 0; k < inputs.size(); ++k)
    directions.push_back(
        uniform(inputs[k].shape(), -1, 1, {.dtype = DType::Float64, .seed = 777 + k}));
  // first(x) = sum_k <d/dx_k sum(fn(x) * w), v_k>, built with create_graph.
  auto first = [&](const std::vector<Tensor>& in, bool keep) {
    Tensor y = weighted_sum(fn, in, weight);
    auto g = grad({y}, in, {}, true, true, true);
    Tensor total = zeros({}, {.dtype = DType::Float64});
    for (std::size_t k = 0; k < g.size(); ++k)
      if (g[k].defined()) total = add(total, sum(mul(g[k], directions[k])));
    (void)keep;
    return total;
  };
  Tensor f = first(inputs, true);
  std::vector<Tensor> analytic(inputs.size());
  if (f.requires_grad()) analytic = grad({f}, inputs, {}, false, false, true);
  auto numeric = numeric_grads(
      [&](const std::vector<Tensor>& in) {
        std::vector<Tensor> leaves;
        for (const auto& t : in) leaves.push_back(detach(t).set_requires_grad(true));
        return first(leaves, false).item<double>();
      },
      inputs, eps);
  return compare(analytic, numeric, inputs, atol, rtol, "second derivative");
}

}  // namespace remat::testing
