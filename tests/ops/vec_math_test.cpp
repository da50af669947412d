// The float32 exp, log, tanh and sigmoid kernels (ops/cpu/vec_math.h) against the C library in
// double, over a million float bit patterns spread across the whole range (every sign,
// exponent and subnormal) and the special values; and their independence from alignment.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <vector>

#include "remat.h"
#include "support/test_util.h"

namespace remat {
namespace {

// Distance in units in the last place; NaN matches only NaN.
std::int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (a == b) return 0;
  auto key = [](float f) {
    const auto i = std::bit_cast<std::int32_t>(f);
    return i < 0 ? std::int64_t{INT32_MIN} - i : std::int64_t{i};
  };
  return std::llabs(key(a) - key(b));
}

struct Case {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> reference;
  std::int64_t max_ulp;
};

const Case kCases[] = {
    {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, 1},
    {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 1},
    {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, 1},
    {"sigmoid", [](const Tensor& x) { return sigmoid(x); },
     [](double x) { return 1 / (1 + std::exp(-x)); }, 2},
};

// Every 4099th bit pattern (about a million floats), in chunks that fit the ops suite's budget.
TEST(VecMath, WithinAFewUlpOfTheCorrectlyRoundedResult) {
  constexpr std::uint64_t kStride = 4099, kChunk = 1 << 15;
  for (const Case& c : kCases) {
    std::int64_t worst = 0;
    float worst_x = 0;
    std::vector<float> xs;
    auto flush = [&] {
      const Tensor y = c.op(tensor<float>(xs));
      const std::vector<float> ys = y.to_vector<float>();
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const auto want = static_cast<float>(c.reference(xs[i]));
        const std::int64_t d = ulp_distance(ys[i], want);
        if (d > worst) worst = d, worst_x = xs[i];
      }
      xs.clear();
    };
    for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += kStride) {
      xs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
      if (xs.size() == kChunk) flush();
    }
    flush();
    EXPECT_LE(worst, c.max_ulp) << c.name << ": " << worst << " ulp at x = " << worst_x;
  }
}

TEST(VecMath, SpecialValues) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs{0.f,   -0.f,   inf,     -inf,   nan,    88.7f,   88.73f, 89.f,
                              -87.f, -100.f, -103.9f, -104.f, 1e-45f, -1e-45f, 1e-38f, 1.f};
  const Tensor x = tensor<float>(xs);
  for (const Case& c : kCases) {
    const std::vector<float> ys = c.op(x).to_vector<float>();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const auto want = static_cast<float>(c.reference(xs[i]));
      EXPECT_LE(ulp_distance(ys[i], want), c.max_ulp)
          << c.name << "(" << xs[i] << ") = " << ys[i] << ", expected " << want;
      if (std::isinf(want) || want == 0) {
        EXPECT_EQ(ys[i], want) << c.name << "(" << xs[i] << ")";
      }
    }
  }
}

// A replay reads its input from another buffer: the same elements give the same bits wherever
// they start (vectorised body, peeled head or scalar tail).
TEST(VecMath, ResultsDoNotDependOnAlignment) {
  const Tensor base = mul(randn({1100}, {.seed = 11}), 30.0);
  const Tensor reference = slice(base, 0, 16, 16 + 1000);
  for (const Case& c : kCases) {
    const Tensor want = c.op(contiguous(reference));
    for (std::int64_t off = 0; off < 16; ++off) {
      // The same 1000 values, shifted by `off` elements within a fresh buffer.
      const Tensor padded = cat({slice(base, 0, 0, off), reference}, 0);
      const Tensor got = slice(c.op(padded), 0, off, off + 1000);
      EXPECT_TRUE(testing::bit_equal(got, want)) << c.name << " at offset " << off;
    }
  }
}

}  // namespace
}  // namespace remat
