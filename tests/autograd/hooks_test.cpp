// Post-accumulate gradient hooks and backward callbacks (autograd/hooks.h): a hook sees the
// pass's summed gradient, once per backward(), in registration order; callbacks run once at the
// end of backward(); grad() runs no hook; misuse is a clear error.
#include "autograd/hooks.h"

#include <gtest/gtest.h>

#include <vector>

#include "remat.h"

namespace remat {
namespace {

TEST(GradHooks, SeeTheSummedGradientOncePerBackwardInOrder) {
  Tensor w = full({3}, 2.0).set_requires_grad();
  std::vector<std::string> log;
  register_post_accumulate_grad_hook(w, [&](const Tensor& leaf) {
    log.push_back(fmt::format("a {}", leaf.grad().to_vector<float>()[0]));
  });
  register_post_accumulate_grad_hook(w, [&](const Tensor&) { log.push_back("b"); });
  // w is used twice: the engine sums both paths before the hook runs (d/dw of 3w + w^2 at 2).
  backward(sum(add(mul(w, full({3}, 3.0)), mul(w, w))));
  EXPECT_EQ(log, (std::vector<std::string>{"a 7", "b"}));
  backward(sum(w));  // accumulates: 7 + 1
  EXPECT_EQ(log.back(), "b");
  EXPECT_EQ(log[2], "a 8");
}

TEST(GradHooks, CallbacksRunOnceAfterEveryNodeAndMayQueueMore) {
  Tensor a = full({2}, 1.0).set_requires_grad();
  Tensor b = full({2}, 1.0).set_requires_grad();
  std::vector<std::string> log;
  int queued = 0;
  auto hook = [&](const Tensor&) {
    log.push_back("hook");
    if (queued++ == 0)
      queue_backward_callback([&] {
        log.push_back("end");
        queue_backward_callback([&] { log.push_back("end2"); });
      });
  };
  register_post_accumulate_grad_hook(a, hook);
  register_post_accumulate_grad_hook(b, hook);
  backward(sum(mul(a, b)));
  EXPECT_EQ(log, (std::vector<std::string>{"hook", "hook", "end", "end2"}));
}

TEST(GradHooks, GradRunsNoHook) {
  Tensor w = full({2}, 1.0).set_requires_grad();
  int calls = 0;
  register_post_accumulate_grad_hook(w, [&](const Tensor&) { ++calls; });
  grad({sum(mul(w, w))}, {w});
  EXPECT_EQ(calls, 0);
}

TEST(GradHooks, MisuseIsAClearError) {
  Tensor w = full({2}, 1.0).set_requires_grad();
  Tensor y = mul(w, w);
  Tensor plain = full({2}, 1.0);
  auto noop = [](const Tensor&) {};
  EXPECT_THROW(register_post_accumulate_grad_hook(y, noop), Error);      // not a leaf
  EXPECT_THROW(register_post_accumulate_grad_hook(plain, noop), Error);  // needs no grad
  EXPECT_THROW(register_post_accumulate_grad_hook(w, nullptr), Error);
  try {
    queue_backward_callback([] {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no backward() call is running"), std::string::npos);
  }
}

}  // namespace
}  // namespace remat
