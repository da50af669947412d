// A training step in steady state touches no fresh page: the pool's cache, glibc's settings
// (core/allocator.cpp) and the kernels' scratch buffers keep every buffer of the previous step.
// Counted with getrusage over steps of a small CNN and of a Transformer LM (whose GEMMs allocate
// oneDNN packing buffers on every call), after warm-up steps.  Freed memory given back to the
// system after every step (malloc_trim, tried) faults 54 to 84 pages into every window of the
// Transformer's steps and 9 to 22 into the CNN's (two runs): the Transformer's test is the one
// sure to catch it.  The heap's small objects (graph nodes, oneDNN's memory handles) settle over
// the first steps, and how many depends on the kernels oneDNN picks for the CPU: with AVX2 the
// CNN's steps 5 to 12 fault in a page or two of the heap's top chunk; with SSE4.1
// (ONEDNN_MAX_CPU_ISA) its steps 19 to 23 fault in 34, 10 and 5 pages, and none after.  So the
// test looks for the first quiet window of 6 steps within the first 76, and fails if there is
// none.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <vector>

#include "models/lm.h"
#include "models/resnet.h"
#include "nn/nn.h"
#include "remat.h"

namespace remat {
namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

constexpr int kWindow = 6;    // steps
constexpr long kQuiet = 8;    // pages of the C library's own (stdio, the engine's small lists)
constexpr int kWindows = 10;  // windows tried after the warm-up

// Page faults of each window of kWindow steps after `warmup` steps, up to and including the
// first window with at most kQuiet faults (or kWindows of them when none is quiet).
template <class Step>
std::vector<long> faults_until_quiet(Step&& step, int warmup) {
  for (int i = 0; i < warmup; ++i) step();
  std::vector<long> windows;
  while (windows.size() < kWindows && (windows.empty() || windows.back() > kQuiet)) {
    const long before = minor_faults();
    for (int i = 0; i < kWindow; ++i) step();
    windows.push_back(minor_faults() - before);
  }
  return windows;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

TEST(PageFaults, NoneInSteadyStateOfACnnStep) {
  if (kSanitized) GTEST_SKIP() << "AddressSanitizer's allocator maps and unmaps on its own";
  manual_seed(1);
  auto net = models::resnet("resnet8", {.in_channels = 3, .num_classes = 10});
  nn::SGD opt(net->parameters(), {.lr = 0.05, .momentum = 0.9});
  const Tensor x = randn({16, 3, 16, 16}, {.seed = 2});
  const Tensor y = randint(0, 10, {16}, {.seed = 3});
  const std::vector<long> windows = faults_until_quiet(
      [&] {
        opt.zero_grad();
        backward(cross_entropy(net->forward(x), y));
        opt.step();
      },
      16);
  EXPECT_LE(windows.back(), kQuiet)
      << "minor page faults in each window of 6 steps of a small CNN: "
      << testing::PrintToString(windows);
}

TEST(PageFaults, NoneInSteadyStateOfATransformerStep) {
  if (kSanitized) GTEST_SKIP() << "AddressSanitizer's allocator maps and unmaps on its own";
  manual_seed(1);
  models::TransformerLm lm({.vocabulary = 64,
                            .d_model = 128,
                            .heads = 4,
                            .feedforward = 512,
                            .layers = 2,
                            .max_length = 64});
  nn::Adam opt(lm.parameters(), {.lr = 1e-3});
  const Tensor tokens = randint(0, 64, {8, 65}, {.seed = 4});
  const Tensor in = contiguous(slice(tokens, 1, 0, 64)),
               target = contiguous(slice(tokens, 1, 1, 65));
  const std::vector<long> windows = faults_until_quiet(
      [&] {
        opt.zero_grad();
        backward(models::language_model_loss(lm.forward(in), target));
        opt.step();
      },
      16);
  EXPECT_LE(windows.back(), kQuiet)
      << "minor page faults in each window of 6 steps of a Transformer LM: "
      << testing::PrintToString(windows);
}

}  // namespace
}  // namespace remat
