// batch_norm and layer_norm (ops/norm.h) against PyTorch: outputs, updated running statistics
// (training) and gradients for [N, C] and [N, C, H, W], with and without affine parameters;
// float64 first and second derivative checks; that the running-statistics update stays out of
// the graph; determinism across thread counts; and errors.
#include "ops/norm.h"

#include <functional>

#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

using testing::all_close;
using testing::bit_equal;
using testing::find_case;
using testing::FixtureCase;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

const std::vector<FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("norm");
  return cases;
}

Tensor leaf(const Tensor& t) {
  Tensor l = detach(t);
  l.set_requires_grad(true);
  return l;
}

Tensor optional(const FixtureCase& c, const std::string& key) {
  return c.tensors.count(key) ? c[key] : Tensor();
}

struct Tol {
  double rtol, atol;
};
Tol tol_for(const Tensor& x) {
  return x.dtype() == DType::Float64 ? Tol{1e-10, 1e-10} : Tol{1e-4, 1e-5};
}

// Gradients of sum(y * w_out) with respect to the defined leaves, against the fixture.
void check_grads(const FixtureCase& c, const Tensor& y,
                 const std::vector<std::pair<std::string, Tensor>>& leaves) {
  std::vector<Tensor> inputs;
  std::vector<std::string> names;
  for (const auto& [name, t] : leaves)
    if (t.defined()) inputs.push_back(t), names.push_back(name);
  auto g = grad({sum(mul(y, c["w_out"]))}, inputs);
  const Tol tol = tol_for(y);
  for (std::size_t i = 0; i < g.size(); ++i)
    EXPECT_TRUE(all_close(g[i], c["grad_" + names[i]], tol.rtol, tol.atol))
        << c.name << " grad " << names[i];
}

TEST(BatchNorm, MatchesPyTorch) {
  for (const char* name : {"bn_train_2d", "bn_train_4d", "bn_train_4d_momentum", "bn_train_plain",
                           "bn_eval_4d", "bn_eval_2d_plain", "bn_train_f64"}) {
    const auto& c = find_case(fixture(), name);
    Tensor x = leaf(c["x"]);
    Tensor w = optional(c, "weight"), b = optional(c, "bias");
    if (w.defined()) w = leaf(w), b = leaf(b);
    Tensor rm = optional(c, "running_mean"), rv = optional(c, "running_var");
    if (rm.defined()) rm = clone(rm), rv = clone(rv);  // updated in place: keep the fixture intact
    Tensor y = batch_norm(x, w, b, rm, rv, c.num("training") != 0, c.num("momentum"), c.num("eps"));
    const Tol tol = tol_for(y);
    EXPECT_TRUE(all_close(y, c["y"], tol.rtol, tol.atol)) << name;
    if (rm.defined()) {
      EXPECT_TRUE(all_close(rm, c["new_running_mean"], tol.rtol, tol.atol)) << name;
      EXPECT_TRUE(all_close(rv, c["new_running_var"], tol.rtol, tol.atol)) << name;
      if (c.num("training") == 0) {
        EXPECT_TRUE(all_close(rm, c["running_mean"], 0, 0))
            << name << ": evaluation must not update";
      }
    }
    check_grads(c, y, {{"x", x}, {"weight", w}, {"bias", b}});
  }
}

TEST(LayerNorm, MatchesPyTorch) {
  for (const char* name : {"ln_1", "ln_2", "ln_plain", "ln_f64"}) {
    const auto& c = find_case(fixture(), name);
    Tensor x = leaf(c["x"]);
    Tensor w = optional(c, "weight"), b = optional(c, "bias");
    if (w.defined()) w = leaf(w), b = leaf(b);
    Tensor y = layer_norm(x, c.list("normalized_shape"), w, b, c.num("eps"));
    const Tol tol = tol_for(y);
    EXPECT_TRUE(all_close(y, c["y"], tol.rtol, tol.atol)) << name;
    check_grads(c, y, {{"x", x}, {"weight", w}, {"bias", b}});
  }
}

TEST(BatchNorm, RunningStatisticsUpdateIsOutsideTheGraph) {
  Tensor x = leaf64({4, 3, 2, 2}, 1);
  Tensor rm = zeros({3}, {.dtype = DType::Float64}), rv = ones({3}, {.dtype = DType::Float64});
  Tensor y = batch_norm(x, Tensor(), Tensor(), rm, rv, true);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_FALSE(rv.requires_grad());
  // The batch statistics themselves, against reductions: momentum 0.1 from (0, 1).
  EXPECT_TRUE(all_close(rm, mul(mean(x, {0, 2, 3}), 0.1), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(rv, add(mul(var(x, {0, 2, 3}), 0.1), 0.9), 1e-12, 1e-12));
}

// momentum std::nullopt: after k batches the statistics are the plain averages of the k batch
// statistics (the variances unbiased), as PyTorch's momentum=None; the counter counts.
TEST(BatchNorm, MomentumNoneIsACumulativeAverageOfTheBatches) {
  const TensorOptions f64{.dtype = DType::Float64};
  Tensor rm = full({3}, 5.0, f64), rv = full({3}, 7.0, f64);
  Tensor count = zeros({}, {.dtype = DType::Int64});
  Tensor mean_sum = zeros({3}, f64), var_sum = zeros({3}, f64);
  for (std::uint64_t k = 0; k < 4; ++k) {
    Tensor x = normal({6, 3, 2}, static_cast<double>(k), 1.0 + static_cast<double>(k),
                      {.dtype = DType::Float64, .seed = 30 + k});
    batch_norm(x, Tensor(), Tensor(), rm, rv, true, std::nullopt, 1e-5, count);
    mean_sum = add(mean_sum, mean(x, {0, 2}));
    var_sum = add(var_sum, var(x, {0, 2}));
  }
  EXPECT_EQ(count.item<std::int64_t>(), 4);
  EXPECT_TRUE(all_close(rm, div(mean_sum, 4.0), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(rv, div(var_sum, 4.0), 1e-12, 1e-12));
  // With a momentum the counter still counts, as PyTorch's module.
  batch_norm(normal({6, 3, 2}, 0, 1, {.dtype = DType::Float64, .seed = 40}), Tensor(), Tensor(), rm,
             rv, true, 0.1, 1e-5, count);
  EXPECT_EQ(count.item<std::int64_t>(), 5);
}

TEST(BatchNorm, TrainingWithoutRunningStatistics) {
  Tensor x = normal({5, 2, 3}, 1, 2, {.dtype = DType::Float64, .seed = 2});
  Tensor none_m, none_v;
  Tensor y = batch_norm(x, Tensor(), Tensor(), none_m, none_v, true);
  EXPECT_FALSE(none_m.defined());
  // Each channel of the output has mean 0 and (biased) variance 1 / (1 + eps / var).
  EXPECT_TRUE(all_close(mean(y, {0, 2}), zeros({2}, {.dtype = DType::Float64}), 0, 1e-12));
  Tensor v = var(x, {0, 2}, 0);
  EXPECT_TRUE(all_close(var(y, {0, 2}, 0), div(v, add(v, 1e-5)), 1e-10, 1e-12));
}

TEST(BatchNorm, GradcheckAndGradgradcheck) {
  for (const Shape& shape : {Shape{4, 3}, Shape{2, 3, 2, 2}}) {
    for (const bool training : {true, false}) {
      for (const bool affine : {true, false}) {
        Tensor x = leaf64(shape, 31, -2, 2);
        Tensor w = leaf64({3}, 32, 0.5, 1.5), b = leaf64({3}, 33);
        Tensor rm0 = uniform({3}, -0.5, 0.5, {.dtype = DType::Float64, .seed = 34});
        Tensor rv0 = uniform({3}, 0.5, 1.5, {.dtype = DType::Float64, .seed = 35});
        testing::Fn fn = [=](const std::vector<Tensor>& in) {
          Tensor rm = rm0, rv = rv0;
          return affine ? batch_norm(in[0], in[1], in[2], rm, rv, training)
                        : batch_norm(in[0], Tensor(), Tensor(), rm, rv, training);
        };
        std::vector<Tensor> inputs = affine ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x};
        const std::string what =
            fmt::format("shape {} training {} affine {}", shape, training, affine);
        EXPECT_TRUE(gradcheck(fn, inputs)) << what;
        EXPECT_TRUE(gradgradcheck(fn, inputs)) << what;
      }
    }
  }
}

TEST(LayerNorm, GradcheckAndGradgradcheck) {
  struct Case {
    Shape shape;
    std::vector<std::int64_t> norm;
  };
  for (const auto& [shape, norm] :
       std::vector<Case>{{{3, 4}, {4}}, {{2, 2, 3}, {2, 3}}, {{5}, {5}}}) {
    for (const bool affine : {true, false}) {
      Tensor x = leaf64(shape, 41, -2, 2);
      Tensor w = leaf64(norm, 42, 0.5, 1.5), b = leaf64(norm, 43);
      testing::Fn fn = [=, norm = norm](const std::vector<Tensor>& in) {
        return affine ? layer_norm(in[0], norm, in[1], in[2]) : layer_norm(in[0], norm);
      };
      std::vector<Tensor> inputs = affine ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x};
      const std::string what = fmt::format("shape {} norm {} affine {}", shape, norm, affine);
      EXPECT_TRUE(gradcheck(fn, inputs)) << what;
      EXPECT_TRUE(gradgradcheck(fn, inputs)) << what;
    }
  }
}

// Ordinary backward runs a fused kernel; with create_graph the derivative is built from public
// ops.  Both must agree, on shapes that span several channel blocks ([N, C] with C > 256) and
// several row blocks of the layer-norm parameter sums.
TEST(Norm, FusedBackwardMatchesPublicOpBackward) {
  auto compare = [](const std::string& what, const testing::Fn& fn, const std::vector<Tensor>& in) {
    Tensor y = fn(in);
    Tensor gy = normal(y.shape(), 0, 1, {.seed = 99});
    auto fused = grad({y}, in, {gy});
    auto graph = grad({fn(in)}, in, {gy}, false, true);
    ASSERT_TRUE(graph[0].requires_grad()) << what << ": the gradient was not built from public ops";
    for (std::size_t i = 0; i < in.size(); ++i) {
      EXPECT_TRUE(all_close(fused[i], graph[i], 1e-4, 1e-5)) << what << " input " << i;
    }
  };
  for (const Shape& shape : {Shape{16, 300}, Shape{8, 6, 5, 7}}) {
    const std::int64_t ch = shape[1];
    Tensor x = leaf(normal(shape, 0.5, 2, {.seed = 61}));
    Tensor w = leaf(normal({ch}, 1, 0.2, {.seed = 62})),
           b = leaf(normal({ch}, 0, 0.2, {.seed = 63}));
    compare(fmt::format("batch_norm {}", shape),
            [](const std::vector<Tensor>& in) {
              Tensor rm, rv;
              return batch_norm(in[0], in[1], in[2], rm, rv, true);
            },
            {x, w, b});
    compare(fmt::format("batch_norm plain {}", shape),
            [](const std::vector<Tensor>& in) {
              Tensor rm, rv;
              return batch_norm(in[0], Tensor(), Tensor(), rm, rv, true);
            },
            {x});
  }
  Tensor x = leaf(normal({100, 3, 24}, -0.5, 2, {.seed = 64}));
  Tensor w = leaf(normal({3, 24}, 1, 0.2, {.seed = 65})),
         b = leaf(normal({3, 24}, 0, 0.2, {.seed = 66}));
  compare("layer_norm",
          [](const std::vector<Tensor>& in) {
            return layer_norm(in[0], {3, 24}, in[1], in[2]);
          },
          {x, w, b});
  compare("layer_norm bias only",
          [](const std::vector<Tensor>& in) { return layer_norm(in[0], {24}, Tensor(), in[1]); },
          {leaf(normal({7, 24}, 0, 1, {.seed = 67})), leaf(normal({24}, 0, 1, {.seed = 68}))});
  compare("layer_norm plain", [](const std::vector<Tensor>& in) { return layer_norm(in[0], {24}); },
          {x});
}

TEST(Norm, SameBitsWithOneOrTwoThreads) {
  Tensor x = normal({16, 8, 9, 9}, 0.3, 2, {.seed = 7});
  Tensor x2 = normal({300, 40}, 0.3, 2, {.seed = 8});
  Tensor w = normal({8}, 1, 0.1, {.seed = 9}), b = normal({8}, 0, 0.1, {.seed = 10});
  Tensor wl = leaf(normal({9, 9}, 1, 0.1, {.seed = 11}));
  auto run = [&] {
    Tensor rm = zeros({8}), rv = ones({8}), rm2 = zeros({40}), rv2 = ones({40});
    Tensor xl = leaf(x), wb = leaf(w), x2l = leaf(x2);
    std::vector<Tensor> out{batch_norm(xl, wb, b, rm, rv, true),
                            rm,
                            rv,
                            batch_norm(x2l, Tensor(), Tensor(), rm2, rv2, true),
                            layer_norm(xl, {9, 9}, wl),
                            layer_norm(x2l, {40})};
    // The fused backward kernels too.
    for (const Tensor& g :
         grad({sum(mul(out[0], out[4])), sum(mul(out[3], out[5]))}, {xl, wb, x2l, wl}))
      out.push_back(g);
    return out;
  };
  const int before = num_threads();
  set_num_threads(1);
  auto one = run();
  set_num_threads(2);
  auto two = run();
  set_num_threads(before);
  for (std::size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bit_equal(one[i], two[i])) << i;
}

TEST(Norm, Errors) {
  Tensor x = zeros({4, 3, 2});
  Tensor none_m, none_v;
  Tensor rm = zeros({3}), rv = ones({3});
  EXPECT_TRUE(throws_with([&] { batch_norm(x, ones({4}), Tensor(), rm, rv, true); },
                          {"batch_norm", "weight", "[4]", "[4, 3, 2]"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(x, Tensor(), Tensor(), none_m, none_v, false); },
                          {"batch_norm", "running_mean", "[4, 3, 2]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        batch_norm(zeros({1, 3}), Tensor(), Tensor(), rm, rv, true);
      },
      {"batch_norm", "more than 1 value per channel", "[1, 3]"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(zeros({3}), Tensor(), Tensor(), rm, rv, true); },
                          {"batch_norm", "[3]"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(x, Tensor(), Tensor(), rm, none_v, true); },
                          {"batch_norm", "running_var"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(x, Tensor(), Tensor(), rm, rv, true, std::nullopt); },
                          {"batch_norm", "num_batches_tracked"}));
  EXPECT_TRUE(throws_with(
      [&] { batch_norm(x, Tensor(), Tensor(), rm, rv, true, std::nullopt, 1e-5, zeros({})); },
      {"batch_norm", "num_batches_tracked", "int64", "float32"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {3}); }, {"layer_norm", "[3]", "[4, 3, 2]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        layer_norm(x, {3, 2}, ones({2, 3}));
      },
      {"layer_norm", "weight", "[2, 3]"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {}); }, {"layer_norm"}));
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

// relu(bn(x) + r) as one op against the same maths as separate ops, in float64: values and
// the gradients of x, weight, bias and the residual, through the fused derivative and the one
// built with create_graph; both kernel layouts ([N, C] and [N, C, H, W]); finite differences.
TEST(BatchNormEpilogue, MatchesSeparateOps) {
  for (const Shape& shape : {Shape{6, 5}, Shape{3, 4, 5, 2}}) {
    const Tensor x = leaf64(shape, 1, -2, 2), r = leaf64(shape, 2, -1, 1);
    const Tensor w = leaf64({shape[1]}, 3, 0.5, 1.5), b = leaf64({shape[1]}, 4, -0.5, 0.5);
    for (bool with_residual : {false, true}) {
      const BatchNormEpilogue e{.residual = with_residual ? r : Tensor(), .relu = true};
      const Tensor fused = batch_norm(x, w, b, Tensor(), Tensor(), true, 0.1, 1e-5, Tensor(), e);
      Tensor plain = batch_norm(x, w, b, Tensor(), Tensor(), true);
      if (with_residual) plain = add(plain, r);
      plain = relu(plain);
      ASSERT_TRUE(all_close(fused, plain, 1e-14, 1e-14));
      const Tensor wt = leaf64(shape, 5);
      std::vector<Tensor> in{x, w, b};
      if (with_residual) in.push_back(r);
      const auto want = grad({sum(mul(plain, wt))}, in);
      const auto got = grad({sum(mul(fused, wt))}, in);
      const Tensor fused2 = batch_norm(x, w, b, Tensor(), Tensor(), true, 0.1, 1e-5, Tensor(), e);
      const auto got_graph = grad({sum(mul(fused2, wt))}, in, {}, false, /*create_graph=*/true);
      for (std::size_t i = 0; i < in.size(); ++i) {
        EXPECT_TRUE(all_close(got[i], want[i], 1e-12, 1e-13))
            << "input " << i << " of " << fmt::format("{}", shape);
        EXPECT_TRUE(all_close(got_graph[i], want[i], 1e-12, 1e-13))
            << "input " << i << " of " << fmt::format("{}", shape) << " (create_graph)";
      }
    }
  }
  const BatchNormEpilogue e{.residual = leaf64({3, 2, 2, 2}, 7), .relu = true};
  auto fn = [&](const std::vector<Tensor>& in) {
    return batch_norm(in[0], in[1], in[2], Tensor(), Tensor(), true, 0.1, 1e-5, Tensor(),
                      {.residual = in[3], .relu = true});
  };
  const std::vector<Tensor> in{leaf64({3, 2, 2, 2}, 8), leaf64({2}, 9, 0.5, 1.5), leaf64({2}, 10),
                               e.residual};
  EXPECT_TRUE(gradcheck(fn, in));
  EXPECT_TRUE(gradgradcheck(fn, in));
}

TEST(BatchNormEpilogue, EvaluationAndErrors) {
  const Tensor x = leaf64({4, 3, 2, 2}, 11), r = leaf64({4, 3, 2, 2}, 12);
  const Tensor mean = detach(leaf64({3}, 13)), var = detach(add(leaf64({3}, 14, 0, 1), 0.5));
  const Tensor y = batch_norm(x, Tensor(), Tensor(), mean, var, false, 0.1, 1e-5, Tensor(),
                              {.residual = r, .relu = true});
  const Tensor want = relu(add(batch_norm(x, Tensor(), Tensor(), mean, var, false), r));
  EXPECT_TRUE(all_close(y, want, 1e-14, 1e-14));
  EXPECT_TRUE(testing::throws_with(
      [&] {
        batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5, Tensor(),
                   {.residual = zeros({4, 3, 2}, {.dtype = DType::Float64})});
      },
      {"batch_norm", "residual", "[4, 3, 2]", "[4, 3, 2, 2]"}));
}

}  // namespace
}  // namespace remat
