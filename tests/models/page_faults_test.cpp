// A training step in steady state touches no fresh page: the pool's cache, glibc's settings
// (core/allocator.cpp) and the kernels' scratch buffers keep every buffer of the previous step.
// Counted with getrusage over steps of a small CNN and of a Transformer LM (whose GEMMs
// allocate oneDNN packing buffers on every call), after warm-up steps.  The heap's small
// objects (graph nodes, oneDNN's memory handles) settle over the first dozen steps: with one
// thread the CNN's steps 5 to 12 fault in a page or two of the heap's top chunk (its size and
// the tensors' blocks no longer change after step 2), hence 16 warm-up steps.
#include <gtest/gtest.h>
#include <sys/resource.h>

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

// Page faults over `steps` steps of `step` after `warmup` steps.
template <class Step>
long faults_in_steady_state(Step&& step, int warmup, int steps) {
  for (int i = 0; i < warmup; ++i) step();
  const long before = minor_faults();
  for (int i = 0; i < steps; ++i) step();
  return minor_faults() - before;
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
  const long faults = faults_in_steady_state(
      [&] {
        opt.zero_grad();
        backward(cross_entropy(net->forward(x), y));
        opt.step();
      },
      16, 6);
  // A page or two of the C library's own (stdio, the engine's small lists) at most.
  EXPECT_LE(faults, 8) << "minor page faults over 6 steps of a small CNN";
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
  const long faults = faults_in_steady_state(
      [&] {
        opt.zero_grad();
        backward(models::language_model_loss(lm.forward(in), target));
        opt.step();
      },
      8, 6);
  EXPECT_LE(faults, 8) << "minor page faults over 6 steps of a Transformer LM";
}

}  // namespace
}  // namespace remat
