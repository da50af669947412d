// cat, stack, split, chunk and unbind (ops/join.h) against PyTorch: values, views, gradients,
// errors.
#include "ops/join.h"

#include <functional>

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
  static const auto cases = testing::load_fixture("join");
  return cases;
}

class JoinValues : public ::testing::TestWithParam<std::string> {};

TEST_P(JoinValues, CatAndStackMatchPyTorch) {
  const auto& c = find_case(fixture(), "join_" + GetParam());
  const Tensor &a = c["a"], &b = c["b"], &d = c["d"], &e = c["c"];
  EXPECT_TRUE(bit_equal(cat({a, b, e}, 1), c["cat_1"]));
  EXPECT_TRUE(bit_equal(cat({a, e}, -1), c["cat_m1"]));
  EXPECT_TRUE(bit_equal(cat({a, d, a}, 0), c["cat_0"]));
  EXPECT_TRUE(bit_equal(cat({transpose(a, 0, 1), transpose(e, 0, 1)}, 0), c["cat_transposed"]));
  EXPECT_TRUE(bit_equal(stack({a, mul(a, 2.0), neg(a)}, 0), c["stack_0"]));
  EXPECT_TRUE(bit_equal(stack({a, neg(a)}, 1), c["stack_1"]));
  EXPECT_TRUE(bit_equal(stack({a, mul(a, 3.0)}, -1), c["stack_m1"]));
  Tensor joined = cat({a, b}, 1);
  EXPECT_FALSE(joined.shares_storage_with(a));
  EXPECT_TRUE(joined.is_contiguous());
}

TEST_P(JoinValues, SplitAndChunkAreViewsMatchingPyTorch) {
  const auto& c = find_case(fixture(), "join_" + GetParam());
  const Tensor& x = c["x"];
  auto check = [&](const std::vector<Tensor>& parts, const std::string& prefix, std::size_t count) {
    ASSERT_EQ(parts.size(), count) << prefix;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      EXPECT_TRUE(bit_equal(parts[i], c[prefix + std::to_string(i)])) << prefix << i;
      EXPECT_TRUE(parts[i].shares_storage_with(x)) << prefix << i;
    }
  };
  check(split(x, 3), "split3_", 3);
  check(split(x, {1, 4, 2}, 0), "split_sizes_", 3);
  check(chunk(x, 3), "chunk3_", 3);
  // Four columns in at most three chunks: ceil(4 / 3) = 2 per piece, so only two pieces.
  check(chunk(x, 3, -1), "chunk3_d1_", static_cast<std::size_t>(c.num("chunk3_count")));
  // Round trip.
  EXPECT_TRUE(bit_equal(cat(split(x, 2, 1), 1), x));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, JoinValues, ::testing::Values("f32", "f64"));

TEST(JoinOps, Int64MatchesPyTorch) {
  const auto& c = find_case(fixture(), "int64");
  const Tensor& a = c["a"];
  EXPECT_TRUE(bit_equal(cat({a, neg(a)}, 0), c["cat_0"]));
  EXPECT_TRUE(bit_equal(stack({a, neg(a)}, 1), c["stack_1"]));
}

TEST(JoinOps, EdgeCasesFollowPyTorch) {
  Tensor x = uniform({3, 2}, -1, 1, {.seed = 1});
  // One tensor still gives a new tensor, as torch.cat does.
  Tensor single = cat({x}, 0);
  EXPECT_FALSE(single.shares_storage_with(x));
  EXPECT_TRUE(bit_equal(single, x));
  EXPECT_EQ(stack({x}, 2).shape(), (Shape{3, 2, 1}));
  EXPECT_EQ(cat({x, zeros({0, 2})}, 0).shape(), (Shape{3, 2}));
  Tensor empty = zeros({0, 2});
  EXPECT_EQ(split(empty, 2).size(), 1u);
  EXPECT_EQ(chunk(empty, 3).size(), 3u);
  auto big = split(x, 5);  // a split size beyond the dim gives one piece
  ASSERT_EQ(big.size(), 1u);
  EXPECT_TRUE(bit_equal(big[0], x));
  auto with_empty = split(x, {0, 3, 0}, 0);
  ASSERT_EQ(with_empty.size(), 3u);
  EXPECT_EQ(with_empty[0].shape(), (Shape{0, 2}));
  EXPECT_TRUE(bit_equal(with_empty[1], x));
}

TEST(JoinOps, ErrorsNameTheOpAndShapes) {
  Tensor a = zeros({2, 3}), b = zeros({3, 3}), v = zeros({3});
  EXPECT_TRUE(throws_with([&] { cat({}, 0); }, {"cat", "non-empty"}));
  EXPECT_TRUE(throws_with([&] { cat({a, b}, 1); }, {"cat", "[3, 3]", "[2, 3]", "dim 1"}));
  EXPECT_TRUE(throws_with([&] { cat({a, v}, 0); }, {"cat", "[2, 3]", "[3]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        cat({a, zeros({2, 3}, {.dtype = DType::Int64})}, 0);
      },
      {"cat", "int64", "float32"}));
  EXPECT_TRUE(throws_with([&] { cat({a, a}, 2); }, {"cat", "dim 2"}));
  EXPECT_TRUE(throws_with(
      [&] {
        cat({scalar_tensor(1.0), scalar_tensor(2.0)}, 0);
      },
      {"cat", "zero-dimensional"}));
  EXPECT_TRUE(throws_with([&] { stack({}, 0); }, {"stack", "non-empty"}));
  EXPECT_TRUE(throws_with(
      [&] {
        stack({a, transpose(b, 0, 1), a}, 0);
      },
      {"stack", "[2, 3]", "[3, 3]", "entry 1"}));
  EXPECT_TRUE(throws_with([&] { stack({a, a}, 3); }, {"stack", "dim 3"}));
  Tensor x = zeros({7, 4});
  EXPECT_TRUE(throws_with(
      [&] {
        split(x, std::vector<std::int64_t>{1, 2}, 0);
      },
      {"split", "[1, 2]", "[7, 4]", "7"}));
  EXPECT_TRUE(throws_with([&] { split(x, std::vector<std::int64_t>{8, -1}, 0); }, {"split", "-1"}));
  EXPECT_TRUE(throws_with([&] { split(x, 0, 1); }, {"split", "split_size", "[7, 4]"}));
  EXPECT_TRUE(throws_with([&] { chunk(x, 0); }, {"chunk", "[7, 4]"}));
  EXPECT_TRUE(throws_with([&] { chunk(x, 2, 2); }, {"chunk", "dim 2"}));
}

struct GradCase {
  std::string name;
  std::vector<Shape> shapes;
  testing::Fn fn;
};

std::vector<GradCase> grad_cases() {
  return {
      {"cat_dim1", {{2, 3}, {2, 1}, {2, 4}}, [](const auto& in) { return cat(in, 1); }},
      {"cat_dim0_strided",
       {{3, 2}, {4, 2}},
       [](const auto& in) {
         return cat({transpose(in[0], 0, 1), slice(transpose(in[1], 0, 1), 1, 0, 4, 2)}, -1);
       }},
      {"cat_same_input_twice",
       {{2, 2}},
       [](const auto& in) {
         return cat({in[0], in[0], in[0]}, 0);
       }},
      {"stack_dim0", {{2, 3}, {2, 3}}, [](const auto& in) { return stack(in, 0); }},
      {"stack_last", {{2, 3}, {2, 3}, {2, 3}}, [](const auto& in) { return stack(in, -1); }},
      {"split",
       {{7, 2}},
       [](const auto& in) {
         auto p = split(in[0], 3);
         return cat({p[2], p[0]}, 0);
       }},
      {"split_sizes",
       {{2, 6}},
       [](const auto& in) {
         auto p = split(in[0], {1, 3, 2}, 1);
         return mul(p[1], sum(p[2], {1}, true));
       }},
      {"chunk",
       {{3, 5}},
       [](const auto& in) {
         auto p = chunk(in[0], 2, 1);
         return mul(p[0], p[0]);
       }},
  };
}

TEST(JoinOps, GradientsMatchFiniteDifferences) {
  std::uint64_t seed = 400;
  for (const auto& gc : grad_cases()) {
    std::vector<Tensor> inputs;
    for (const auto& s : gc.shapes) inputs.push_back(leaf64(s, ++seed));
    EXPECT_TRUE(gradcheck(gc.fn, inputs)) << gc.name;
    EXPECT_TRUE(gradgradcheck(
        [&](const std::vector<Tensor>& in) {
          Tensor y = gc.fn(in);
          return mul(y, y);
        },
        inputs))
        << gc.name;
  }
}

TEST(JoinOps, CatOfManyInputsIsOneOpWithAGradientForEach) {
  // More inputs than the 32 bits of an op's save mask: cat saves none, so this must still work.
  std::vector<Tensor> parts;
  for (int i = 0; i < 40; ++i) parts.push_back(leaf64({1, 2}, 500 + i));
  Tensor y = cat(parts, 0);
  EXPECT_EQ(y.shape(), (Shape{40, 2}));
  Tensor w = uniform({40, 2}, -1, 1, {.dtype = DType::Float64, .seed = 9});
  auto grads = grad({sum(mul(y, w))}, parts);
  ASSERT_EQ(grads.size(), 40u);
  for (int i = 0; i < 40; ++i) EXPECT_TRUE(bit_equal(grads[i], slice(w, 0, i, i + 1))) << i;
}

// unbind: views equal to select at every index (along any dim), one op however many pieces,
// a gradient and second derivative that match finite differences, and clear errors.
TEST(JoinOps, UnbindGivesEverySelectAsOneOp) {
  const Tensor x = leaf64({3, 40, 2}, 610);
  for (std::int64_t dim : {0, 1, -1}) {
    const auto parts = unbind(x, dim);
    ASSERT_EQ(static_cast<std::int64_t>(parts.size()), x.size(dim)) << dim;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      EXPECT_TRUE(bit_equal(parts[i], select(x, dim, static_cast<std::int64_t>(i)))) << dim;
      EXPECT_EQ(parts[i].storage(), x.storage());  // a view
    }
  }
  // 40 pieces, more than an op's 32-bit save masks: each piece gets its own gradient row.
  const auto parts = unbind(x, 1);
  Tensor loss;
  for (std::size_t i = 0; i < parts.size(); i += 3) {
    const Tensor term = mul(sum(parts[i]), static_cast<double>(i + 1));
    loss = loss.defined() ? add(loss, term) : term;
  }
  const Tensor g = grad({loss}, {x})[0];
  for (std::int64_t i = 0; i < 40; ++i) {
    const double want = i % 3 == 0 ? static_cast<double>(i + 1) : 0.0;
    EXPECT_TRUE(bit_equal(select(g, 1, i), full({3, 2}, want, {.dtype = DType::Float64}))) << i;
  }
  auto fn = [](const std::vector<Tensor>& in) {
    const auto p = unbind(in[0], 1);
    return add(mul(p[0], p[2]), p[1]);
  };
  const Tensor y = leaf64({2, 3, 4}, 611);
  EXPECT_TRUE(gradcheck(fn, {y}));
  EXPECT_TRUE(
      gradgradcheck([&](const std::vector<Tensor>& in) { return mul(fn(in), fn(in)); }, {y}));
  EXPECT_TRUE(unbind(zeros({2, 0}), 1).empty());
  EXPECT_TRUE(throws_with([] { unbind(zeros({})); }, {"unbind", "0-dim"}));
  EXPECT_TRUE(throws_with([] { unbind(zeros({2, 3}), 2); }, {"unbind", "dim"}));
}

}  // namespace
}  // namespace remat
