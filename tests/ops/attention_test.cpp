// The fused attention op (ops/attention.h) against the same maths in matmul and softmax, in
// float64: outputs and gradients for every mask kind and rank, several row blocks, strided
// inputs; finite differences of first and second derivatives; dropout's mask from its key;
// errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "remat.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;
using testing::throws_with;

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor causal(std::int64_t n, DType dtype) {
  return triu(full({n, n}, -kInf, {.dtype = dtype}), 1);
}

Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                 double scale) {
  Tensor s = mul(matmul(q, transpose(k, -2, -1)), scale);
  if (mask.defined()) s = mask.dtype() == DType::Int64 ? masked_fill(s, mask, -kInf) : add(s, mask);
  return matmul(softmax(s, -1), v);
}

// Output and the gradients of q, k and v against the reference, for one configuration.
void expect_matches(const Shape& qs, const Shape& ks, const Shape& vs, const Tensor& mask) {
  const Tensor q = leaf64(qs, 1), k = leaf64(ks, 2), v = leaf64(vs, 3);
  const double scale = 1 / std::sqrt(static_cast<double>(qs.back()));
  const Tensor y = attention(q, k, v, mask, scale);
  const Tensor want = reference(q, k, v, mask, scale);
  ASSERT_TRUE(all_close(y, want, 1e-12, 1e-13));
  const Tensor w = leaf64(y.shape(), 4);
  const auto g = grad({sum(mul(y, w))}, {q, k, v});
  const auto gw = grad({sum(mul(want, w))}, {q, k, v});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(all_close(g[i], gw[i], 1e-11, 1e-12)) << "input " << i;
}

TEST(Attention, MatchesMatmulAndSoftmax) {
  expect_matches({2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 6}, Tensor());
  // Ranks 2, 3 and 5.
  expect_matches({5, 4}, {6, 4}, {6, 3}, Tensor());
  expect_matches({3, 5, 4}, {3, 6, 4}, {3, 6, 2}, Tensor());
  expect_matches({2, 2, 2, 4, 3}, {2, 2, 2, 5, 3}, {2, 2, 2, 5, 3}, Tensor());
}

TEST(Attention, MasksOfEveryKind) {
  const Shape q{2, 3, 6, 4}, kv{2, 3, 6, 4};
  expect_matches(q, kv, kv, causal(6, DType::Float64));        // [L, S] float, -inf above
  expect_matches(q, kv, kv, detach(leaf64({2, 3, 6, 6}, 7)));  // full, finite
  // Batch 0 may not attend to key 5, batch 1 not to keys 2 and 3.
  const Tensor padding =
      reshape(tensor<std::int64_t>({0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0}), {2, 1, 1, 6});
  expect_matches(q, kv, kv, padding);  // int64 key padding, broadcast over heads and queries
}

// Enough query rows that the kernel works in two row blocks (163 and 17 rows of float64 scores;
// dK and dV accumulate over them).
TEST(Attention, ManyRowBlocks) {
  expect_matches({1, 1, 180, 3}, {1, 1, 100, 3}, {1, 1, 100, 2},
                 to_dtype(triu(full({180, 100}, -kInf), 41), DType::Float64));
}

// q, k and v as the three thirds of one projection, split into heads: strided views.
TEST(Attention, StridedInputsFromOneProjection) {
  const Tensor x = leaf64({2, 5, 3 * 8}, 5);
  auto heads = [](const Tensor& t) { return permute(reshape(t, {2, 5, 2, 4}), {0, 2, 1, 3}); };
  const auto parts = chunk(x, 3, -1);
  const Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
  ASSERT_NE(q.stride(2), 4);  // rows three projections apart
  const Tensor y = attention(q, k, v, Tensor(), 0.5);
  const Tensor want = reference(q, k, v, Tensor(), 0.5);
  EXPECT_TRUE(all_close(y, want, 1e-12, 1e-13));
  const auto g = grad({sum(mul(y, y))}, {x});
  const auto gw = grad({sum(mul(want, want))}, {x});
  EXPECT_TRUE(all_close(g[0], gw[0], 1e-11, 1e-12));
}

// is_causal computes only the keys each block of query rows can see (several blocks here),
// alone, with a key padding mask, and with fewer queries than keys (top-left aligned).
TEST(Attention, CausalSkipsTheForbiddenScores) {
  auto check = [](const Shape& qs, const Shape& ks, const Tensor& mask) {
    const Tensor q = leaf64(qs, 41), k = leaf64(ks, 42), v = leaf64(ks, 43);
    const std::int64_t L = qs[qs.size() - 2], S = ks[ks.size() - 2];
    const Tensor causal_mask = triu(full({L, S}, -kInf, {.dtype = DType::Float64}), 1);
    const Tensor full_mask = mask.defined() ? add(mask, causal_mask) : causal_mask;
    const Tensor y = attention(q, k, v, mask, 0.4, 0, false, /*is_causal=*/true);
    const Tensor want = reference(q, k, v, full_mask, 0.4);
    ASSERT_TRUE(all_close(y, want, 1e-12, 1e-13));
    const Tensor w = leaf64(y.shape(), 44);
    const auto g = grad({sum(mul(y, w))}, {q, k, v});
    const auto gw = grad({sum(mul(want, w))}, {q, k, v});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(all_close(g[i], gw[i], 1e-11, 1e-12)) << "input " << i;
  };
  check({2, 2, 70, 4}, {2, 2, 70, 4}, Tensor());
  // Keys 3, 10 and 45 padded (never key 0: a row with no key left is NaN either way).
  std::vector<double> pad(50, 0.0);
  for (int j : {3, 10, 45}) pad[j] = -kInf;
  check({2, 2, 40, 4}, {2, 2, 50, 4}, reshape(tensor<double>(pad), {1, 1, 1, 50}));
  // With dropout, the fused derivative and the composed one (create_graph) agree.
  const Tensor q = leaf64({1, 2, 40, 3}, 46), k = leaf64({1, 2, 40, 3}, 47),
               v = leaf64({1, 2, 40, 3}, 48);
  manual_seed(4);
  const Tensor y1 = attention(q, k, v, Tensor(), 0.5, 0.3, true, true);
  manual_seed(4);
  const Tensor y2 = attention(q, k, v, Tensor(), 0.5, 0.3, true, true);
  const auto fused = grad({sum(y1)}, {q, k, v});
  const auto composed = grad({sum(y2)}, {q, k, v}, {}, false, /*create_graph=*/true);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(all_close(fused[i], composed[i], 1e-11, 1e-12)) << "input " << i;
  auto fn = [](const std::vector<Tensor>& in) {
    return attention(in[0], in[1], in[2], Tensor(), 0.7, 0, false, true);
  };
  const std::vector<Tensor> in{leaf64({1, 1, 5, 2}, 49), leaf64({1, 1, 5, 2}, 50),
                               leaf64({1, 1, 5, 2}, 51)};
  EXPECT_TRUE(gradcheck(fn, in));
  EXPECT_TRUE(gradgradcheck(fn, in));
}

TEST(Attention, FiniteDifferencesOfFirstAndSecondDerivatives) {
  const Tensor mask = causal(4, DType::Float64);
  auto fn = [&](const std::vector<Tensor>& in) {
    return attention(in[0], in[1], in[2], mask, 0.7);
  };
  const std::vector<Tensor> in{leaf64({1, 2, 4, 3}, 11), leaf64({1, 2, 4, 3}, 12),
                               leaf64({1, 2, 4, 2}, 13)};
  EXPECT_TRUE(gradcheck(fn, in));
  EXPECT_TRUE(gradgradcheck(fn, in));
}

// The fused derivative and the one written with public ops (create_graph) see the same
// dropout mask, drawn from the op's key.
TEST(Attention, DropoutMaskIsTheKeys) {
  const Tensor q = leaf64({2, 2, 5, 4}, 21), k = leaf64({2, 2, 6, 4}, 22),
               v = leaf64({2, 2, 6, 3}, 23);
  manual_seed(3);
  const Tensor y1 = attention(q, k, v, Tensor(), 0.5, 0.4, true);
  manual_seed(3);
  const Tensor y2 = attention(q, k, v, Tensor(), 0.5, 0.4, true);
  EXPECT_TRUE(testing::bit_equal(y1, y2));
  EXPECT_FALSE(all_close(y1, attention(q, k, v, Tensor(), 0.5), 1e-6, 1e-6));
  const Tensor w = leaf64(y1.shape(), 24);
  const auto fused = grad({sum(mul(y1, w))}, {q, k, v});
  const auto composed = grad({sum(mul(y2, w))}, {q, k, v}, {}, false, /*create_graph=*/true);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(all_close(fused[i], composed[i], 1e-11, 1e-12)) << "input " << i;
  // Evaluation and p = 0 draw nothing; p = 1 drops everything.
  EXPECT_TRUE(testing::bit_equal(attention(q, k, v, Tensor(), 0.5, 0.4, false),
                                 attention(q, k, v, Tensor(), 0.5)));
  EXPECT_TRUE(all_close(attention(q, k, v, Tensor(), 0.5, 1.0, true),
                        zeros({2, 2, 5, 3}, {.dtype = DType::Float64})));
}

TEST(Attention, Float32AgreesWithFloat64) {
  const Tensor q = leaf64({2, 4, 16, 8}, 31), k = leaf64({2, 4, 16, 8}, 32),
               v = leaf64({2, 4, 16, 8}, 33);
  const Tensor mask = causal(16, DType::Float32);
  const Tensor y32 = attention(to_dtype(q, DType::Float32), to_dtype(k, DType::Float32),
                               to_dtype(v, DType::Float32), mask, 0.35);
  const Tensor y64 = attention(q, k, v, to_dtype(mask, DType::Float64), 0.35);
  EXPECT_TRUE(all_close(to_dtype(y32, DType::Float64), y64, 1e-5, 1e-6));
}

TEST(Attention, BadInputNamesWhatIsWrong) {
  const Tensor q = zeros({2, 5, 4}), k = zeros({2, 6, 4}), v = zeros({2, 6, 3});
  EXPECT_TRUE(throws_with(
      [&] {
        attention(q, zeros({2, 6, 5}), v, Tensor(), 1);
      },
      {"attention", "[2, 5, 4]", "[2, 6, 5]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        attention(q, k, zeros({2, 7, 3}), Tensor(), 1);
      },
      {"attention", "[2, 7, 3]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        attention(q, zeros({3, 6, 4}), zeros({3, 6, 3}), Tensor(), 1);
      },
      {"attention", "leading dims"}));
  EXPECT_TRUE(throws_with(
      [&] {
        attention(q, k, v, zeros({5, 7}), 1);
      },
      {"attention", "mask", "[5, 7]", "[2, 5, 6]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        attention(q, k, v, zeros({5, 6}, {.dtype = DType::Float64}), 1);
      },
      {"attention", "mask", "float64"}));
  EXPECT_TRUE(throws_with(
      [&] {
        attention(q, k, v, Tensor(zeros({5, 6})).set_requires_grad(true), 1);
      },
      {"attention", "mask", "requires grad"}));
  EXPECT_TRUE(throws_with([&] { attention(q, k, v, Tensor(), 1, 1.5); }, {"attention", "dropout"}));
  EXPECT_TRUE(throws_with([&] { attention(to_dtype(q, DType::Int64), k, v, Tensor(), 1); },
                          {"attention", "int64"}));
}

}  // namespace
}  // namespace remat
