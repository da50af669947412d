// DESIGN.md section 8: replay after eviction relies on every oneDNN primitive giving identical
// bits for identical inputs.  Each primitive (GEMM, convolution forward, backward-data,
// backward-weights) runs twice on copies of the inputs held in different buffers, at 1 and 2
// threads, and the outputs must be bit-identical; the same holds through the public ops.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "ops/conv.h"
#include "ops/cpu/onednn.h"
#include "ops/linalg.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::bit_equal;

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

// A float buffer of n elements at `shift` floats past a 64-byte boundary, filled from `seed`.
class Buffer {
 public:
  Buffer(std::size_t n, std::size_t shift, std::uint32_t seed) : n_(n) {
    storage_.reset(
        static_cast<float*>(std::aligned_alloc(64, ((n + shift) * sizeof(float) + 63) / 64 * 64)));
    data_ = storage_.get() + shift;
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (std::size_t i = 0; i < n; ++i) data_[i] = dist(gen);
  }
  Buffer(const Buffer& other, std::size_t shift) : n_(other.n_) {
    storage_.reset(
        static_cast<float*>(std::aligned_alloc(64, ((n_ + shift) * sizeof(float) + 63) / 64 * 64)));
    data_ = storage_.get() + shift;
    std::memcpy(data_, other.data_, n_ * sizeof(float));
  }
  float* data() const { return data_; }
  std::size_t size() const { return n_; }
  // Garbage the output must not depend on (oneDNN must not read it).
  void poison(float v) { std::fill_n(data_, n_, v); }

 private:
  std::unique_ptr<float, FreeDeleter> storage_;
  float* data_ = nullptr;
  std::size_t n_;
};

::testing::AssertionResult same_bits(const Buffer& a, const Buffer& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(a.data() + i, b.data() + i, sizeof(float)) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a.data()[i] << " vs " << b.data()[i];
  return ::testing::AssertionSuccess();
}

class OneDnnDeterminism : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    saved_threads_ = num_threads();
    set_num_threads(GetParam());
  }
  void TearDown() override { set_num_threads(saved_threads_); }

 private:
  int saved_threads_ = 1;
};

// The second copy sits at `shift` floats past alignment: the pool aligns buffers to 64 bytes,
// but a view with an offset hands oneDNN an interior pointer.
constexpr std::size_t kShifts[] = {0, 3};

TEST_P(OneDnnDeterminism, GemmIsBitIdenticalAcrossBuffers) {
  struct Case {
    bool ta, tb;
    std::int64_t m, n, k;
  };
  for (const Case& c : {Case{false, false, 257, 190, 333}, Case{true, false, 64, 300, 129},
                        Case{false, true, 33, 17, 1000}, Case{true, true, 128, 128, 128}}) {
    for (std::size_t shift : kShifts) {
      SCOPED_TRACE(
          fmt::format("ta {} tb {} m {} n {} k {} shift {}", c.ta, c.tb, c.m, c.n, c.k, shift));
      const std::int64_t lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n;
      Buffer a(c.m * c.k, 0, 1), b(c.k * c.n, 0, 2);
      Buffer a2(a, shift), b2(b, shift);
      Buffer out1(c.m * c.n, 0, 3), out2(c.m * c.n, shift, 4);
      out1.poison(1e30f);
      out2.poison(-7.f);
      detail::sgemm(c.ta, c.tb, c.m, c.n, c.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, out1.data(),
                    c.n);
      detail::sgemm(c.ta, c.tb, c.m, c.n, c.k, 1.f, a2.data(), lda, b2.data(), ldb, 0.f,
                    out2.data(), c.n);
      EXPECT_TRUE(same_bits(out1, out2));
    }
  }
}

detail::ConvGeometry geometry(std::int64_t n, std::int64_t c, std::int64_t hw, std::int64_t o,
                              std::int64_t k, std::int64_t stride, std::int64_t pad,
                              std::int64_t groups) {
  detail::ConvGeometry g;
  g.n = n, g.c = c, g.h = hw, g.w = hw, g.o = o, g.kh = k, g.kw = k;
  g.stride_h = g.stride_w = stride;
  g.pad_h = g.pad_w = pad;
  g.groups = groups;
  g.oh = g.ow = (hw + 2 * pad - k) / stride + 1;
  return g;
}

std::vector<detail::ConvGeometry> conv_cases() {
  return {geometry(4, 16, 12, 32, 3, 1, 1, 1), geometry(3, 16, 13, 32, 3, 2, 1, 1),
          geometry(2, 32, 9, 32, 3, 1, 1, 32), geometry(2, 3, 16, 16, 5, 1, 2, 1),
          geometry(2, 16, 8, 16, 3, 1, 1, 4)};
}

TEST_P(OneDnnDeterminism, ConvolutionPrimitivesAreBitIdenticalAcrossBuffers) {
  for (const auto& g : conv_cases()) {
    const std::size_t xs = g.n * g.c * g.h * g.w, ws = g.o * (g.c / g.groups) * g.kh * g.kw,
                      ys = g.n * g.o * g.oh * g.ow;
    for (std::size_t shift : kShifts) {
      SCOPED_TRACE(fmt::format("n {} c {} hw {} o {} k {} stride {} groups {} shift {}", g.n, g.c,
                               g.h, g.o, g.kh, g.stride_h, g.groups, shift));
      Buffer x(xs, 0, 10), w(ws, 0, 11), bias(g.o, 0, 12), gy(ys, 0, 13);
      Buffer x2(x, shift), w2(w, shift), bias2(bias, shift), gy2(gy, shift);
      {
        Buffer y1(ys, 0, 0), y2(ys, shift, 0);
        y1.poison(1e30f), y2.poison(-3.f);
        detail::conv2d_forward(g, x.data(), w.data(), bias.data(), y1.data());
        detail::conv2d_forward(g, x2.data(), w2.data(), bias2.data(), y2.data());
        EXPECT_TRUE(same_bits(y1, y2)) << "forward";
      }
      {
        Buffer gx1(xs, 0, 0), gx2(xs, shift, 0);
        gx1.poison(1e30f), gx2.poison(-3.f);
        detail::conv2d_backward_data(g, gy.data(), w.data(), gx1.data());
        detail::conv2d_backward_data(g, gy2.data(), w2.data(), gx2.data());
        EXPECT_TRUE(same_bits(gx1, gx2)) << "backward data";
      }
      {
        Buffer gw1(ws, 0, 0), gw2(ws, shift, 0);
        gw1.poison(1e30f), gw2.poison(-3.f);
        detail::conv2d_backward_weights(g, x.data(), gy.data(), gw1.data());
        detail::conv2d_backward_weights(g, x2.data(), gy2.data(), gw2.data());
        EXPECT_TRUE(same_bits(gw1, gw2)) << "backward weights";
      }
    }
  }
}

// The same through the public ops, whose buffers come from the pool: clones are new cells.
TEST_P(OneDnnDeterminism, PublicOpsGiveIdenticalBitsOnClonedInputs) {
  Tensor a = uniform({3, 70, 90}, -1, 1, {.seed = 1}), b = uniform({90, 50}, -1, 1, {.seed = 2});
  EXPECT_TRUE(bit_equal(matmul(a, b), matmul(clone(a), clone(b))));
  Tensor x = uniform({4, 16, 11, 11}, -1, 1, {.seed = 3}),
         w = uniform({32, 16, 3, 3}, -1, 1, {.seed = 4});
  Tensor bias = uniform({32}, -1, 1, {.seed = 5});
  const Conv2dOptions o{.stride = 2, .padding = 1};
  Tensor y = conv2d(x, w, bias, o);
  EXPECT_TRUE(bit_equal(y, conv2d(clone(x), clone(w), clone(bias), o)));
  Tensor gy = uniform(y.shape(), -1, 1, {.seed = 6});
  EXPECT_TRUE(bit_equal(conv2d_backward_input(gy, w, x.shape(), o),
                        conv2d_backward_input(clone(gy), clone(w), x.shape(), o)));
  EXPECT_TRUE(bit_equal(conv2d_backward_weight(x, gy, w.shape(), o),
                        conv2d_backward_weight(clone(x), clone(gy), w.shape(), o)));
}

INSTANTIATE_TEST_SUITE_P(Threads, OneDnnDeterminism, ::testing::Values(1, 2),
                         [](const auto& info) { return fmt::format("threads{}", info.param); });

}  // namespace
}  // namespace remat
