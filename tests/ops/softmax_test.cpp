// softmax / log_softmax (ops/softmax.h) against PyTorch: values and gradients over several
// shapes and dims, strided input, large values, float64 gradient and second-derivative checks,
// determinism across thread counts, and errors.
#include "ops/softmax.h"

#include <cmath>
#include <functional>
#include <limits>

#include "dtr/cell.h"
#include "ops/op.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

using testing::all_close;
using testing::bit_equal;
using testing::find_case;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

const std::vector<testing::FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("softmax");
  return cases;
}

Tensor leaf(const Tensor& t) {
  Tensor l = detach(t);
  l.set_requires_grad(true);
  return l;
}

TEST(Softmax, ValuesAndGradientsMatchPyTorch) {
  for (const auto& c : fixture()) {
    if (c.name == "transposed") continue;
    const auto dim = static_cast<std::int64_t>(c.num("dim"));
    const bool f64 = c["x"].dtype() == DType::Float64;
    const double rtol = f64 ? 1e-12 : 1e-5, atol = f64 ? 1e-12 : 1e-6;
    for (const bool log : {false, true}) {
      const std::string name = log ? "log_softmax" : "softmax";
      Tensor x = leaf(c["x"]);
      Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
      EXPECT_TRUE(all_close(y, c[name], rtol, atol)) << c.name << " " << name;
      Tensor g = grad({sum(mul(y, c["w"]))}, {x})[0];
      EXPECT_TRUE(all_close(g, c["grad_" + name], f64 ? 1e-10 : 1e-4, f64 ? 1e-10 : 1e-5))
          << c.name << " grad " << name;
    }
  }
}

TEST(Softmax, LargeValuesDoNotOverflow) {
  const auto& c = find_case(fixture(), "large_values");
  Tensor y = softmax(c["x"], 1);
  for (double v : y.to_vector<double>()) EXPECT_TRUE(std::isfinite(v)) << v;
  for (double v : log_softmax(c["x"], 1).to_vector<double>()) EXPECT_TRUE(std::isfinite(v)) << v;
}

TEST(Softmax, StridedInput) {
  const auto& c = find_case(fixture(), "transposed");
  Tensor xt = transpose(c["xt"], 0, 1);
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_TRUE(all_close(softmax(xt, 1), c["softmax"]));
  EXPECT_TRUE(all_close(log_softmax(xt, -1), c["log_softmax"]));
}

// A softmax over an outer dim wider than one column block (the kernel walks 256 columns at a
// time) must agree with the row kernel applied to the transposed tensor.
TEST(Softmax, WideColumnsMatchRows) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor x = normal({2, 5, 300}, 0, 4, {.dtype = dtype, .seed = 3});
    for (const bool log : {false, true}) {
      Tensor cols = log ? log_softmax(x, 1) : softmax(x, 1);
      Tensor rows = log ? log_softmax(contiguous(transpose(x, 1, 2)), 2)
                        : softmax(contiguous(transpose(x, 1, 2)), 2);
      EXPECT_TRUE(all_close(cols, transpose(rows, 1, 2), 1e-6, 1e-7)) << "log " << log;
    }
  }
}

// Attention masks use -inf: those entries must be exactly 0 (softmax) and -inf (log_softmax),
// along the innermost dim and along an outer one.
TEST(Softmax, MinusInfinityGivesExactZero) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = tensor<float>({0.5f, -inf, 2.0f, -inf, 3.0f, 1.0f}, Shape{2, 3});
  for (const std::int64_t dim : {0, 1}) {
    Tensor p = softmax(x, dim), lp = log_softmax(x, dim);
    for (std::int64_t i : {1, 3}) {
      EXPECT_EQ(p.to_vector<float>()[i], 0.0f) << "dim " << dim << " element " << i;
      EXPECT_EQ(lp.to_vector<float>()[i], -inf) << "dim " << dim << " element " << i;
    }
  }
  EXPECT_EQ(softmax(x, 0).at<float>({1, 1}), 1.0f);
}

TEST(Softmax, RowsSumToOne) {
  Tensor x = normal({3, 7, 4}, 0, 5, {.seed = 9});
  EXPECT_TRUE(all_close(sum(softmax(x, 1), {1}), ones({3, 4}), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(sum(exp(log_softmax(x, 2)), {2}), ones({3, 7}), 1e-6, 1e-6));
}

TEST(Softmax, ZeroDimIsOne) {
  Tensor x = scalar_tensor(3.5);
  EXPECT_EQ(softmax(x, 0).item<float>(), 1.0f);
  EXPECT_EQ(log_softmax(x, -1).item<float>(), 0.0f);
}

TEST(Softmax, GradcheckAndGradgradcheck) {
  struct Case {
    Shape shape;
    std::int64_t dim;
  };
  for (const auto& [shape, dim] :
       std::vector<Case>{{{3, 4}, 1}, {{3, 4}, 0}, {{2, 3, 2}, 1}, {{2, 2, 3}, -1}}) {
    for (const bool log : {false, true}) {
      Tensor x = leaf64(shape, 11, -2, 2);
      testing::Fn fn = [dim = dim, log](const std::vector<Tensor>& in) {
        return log ? log_softmax(in[0], dim) : softmax(in[0], dim);
      };
      EXPECT_TRUE(gradcheck(fn, {x})) << "log " << log << " dim " << dim;
      EXPECT_TRUE(gradgradcheck(fn, {x})) << "log " << log << " dim " << dim;
    }
  }
}

TEST(Softmax, SameBitsWithOneOrTwoThreads) {
  Tensor x = normal({64, 33, 20}, 0, 3, {.seed = 5});
  const int before = num_threads();
  set_num_threads(1);
  Tensor a = softmax(x, 1), b = log_softmax(x, 2);
  set_num_threads(2);
  Tensor c = softmax(x, 1), d = log_softmax(x, 2);
  set_num_threads(before);
  EXPECT_TRUE(bit_equal(a, c));
  EXPECT_TRUE(bit_equal(b, d));
}

// Replay runs the recorded op into whatever buffer the pool hands out: the bits must not
// depend on the output's address (vectorised and scalar exp differ in the last bit).
TEST(Softmax, ReplayIntoAnyBufferGivesTheSameBits) {
  for (const bool log : {false, true}) {
    for (const Shape& shape : {Shape{5, 37}, Shape{3, 7, 29}}) {
      Tensor x = normal(shape, 0, 3, {.seed = 12});
      Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
      const auto& record = static_cast<Cell&>(*y.storage()).record();
      ASSERT_TRUE(record);
      for (std::size_t shift : {1u, 3u}) {
        std::vector<float> buffer(static_cast<std::size_t>(y.numel()) + shift);
        KernelArg in{&record->input_metas[0], record->inputs[0]->buffer()};
        KernelArg out{&record->output_metas[0], buffer.data() + shift};
        record->producer->execute({&in, 1}, {&out, 1});
        std::vector<float> again(buffer.begin() + static_cast<std::ptrdiff_t>(shift), buffer.end());
        EXPECT_TRUE(bit_equal(tensor<float>(again, y.shape()), y))
            << "log " << log << " shift " << shift;
      }
    }
  }
}

TEST(Softmax, Errors) {
  EXPECT_TRUE(throws_with([] { softmax(arange(0, 4), 0); }, {"softmax", "int64", "[4]"}));
  EXPECT_TRUE(throws_with([] { log_softmax(zeros({2, 3}), 2); }, {"log_softmax"}));
  EXPECT_TRUE(throws_with([] { softmax(Tensor(), 0); }, {"softmax"}));
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// The derivative along the last dim is one fused op in ordinary training and public ops under
// create_graph: the same gradients, in float64, for softmax and log_softmax.
TEST(SoftmaxBackward, FusedEqualsPublicOps) {
  for (bool log : {false, true}) {
    const Tensor x = testing::leaf64({5, 37}, 1, -3, 3), w = testing::leaf64({5, 37}, 2);
    auto f = [&] { return sum(mul(log ? log_softmax(x, -1) : softmax(x, -1), w)); };
    const auto fused = grad({f()}, {x});
    const auto composed = grad({f()}, {x}, {}, false, /*create_graph=*/true);
    EXPECT_TRUE(testing::all_close(fused[0], composed[0], 1e-13, 1e-15))
        << (log ? "log_softmax" : "softmax");
  }
}

}  // namespace
}  // namespace remat
