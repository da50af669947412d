// How many full-size tensors the backward of a ResNet block's tail holds at once.  This, not
// the number of activations, sets the smallest budget a CNN can train under: every resident
// tensor beyond the op's inputs and outputs can be evicted, those cannot.
#include "dtr/pool.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/reduce.h"
#include "support/test_util.h"

namespace remat {
namespace {

// relu(batch_norm(x) + residual)'s backward, from the moment its incoming gradient exists, holds
// two full-size tensors besides what was resident before (x, the residual, the output): the
// ReLU's masked gradient (which is also the residual's gradient), and the incoming gradient or
// x's gradient, never both.  A fused kernel held the incoming gradient, both gradients it
// produced, and the mask's source.
TEST(WorkingSet, BatchNormAddReluBackwardHoldsTwoNewActivations) {
  Pool& pool = Pool::of(Device::cpu());
  pool.configure({});
  const Shape shape{8, 16, 16, 16};
  const std::size_t full = 8 * 16 * 16 * 16 * sizeof(float);
  Tensor x = uniform(shape, -1, 1, {.seed = 1}).set_requires_grad(true);
  Tensor r = uniform(shape, -1, 1, {.seed = 2}).set_requires_grad(true);
  Tensor w = uniform({16}, 0.5, 1.5, {.seed = 3}).set_requires_grad(true);
  Tensor b = uniform({16}, -0.5, 0.5, {.seed = 4}).set_requires_grad(true);
  Tensor c = uniform(shape, -1, 1, {.seed = 5});
  {
    Tensor y = batch_norm(x, w, b, Tensor(), Tensor(), true, 0.1, 1e-5, Tensor(),
                          {.residual = r, .relu = true});
    Tensor loss = sum(mul(y, c));  // its gradient reaches y as a full-size c * 1
    const std::size_t before = pool.resident_bytes();
    pool.reset_peak();
    backward(loss);
    // x.grad and r.grad are the two new tensors that stay; nothing else full-size on top.
    EXPECT_LE(pool.peak_resident_bytes(), before + 2 * full + 4096)
        << "peak " << pool.peak_resident_bytes() << " resident before " << before;
  }
  ASSERT_TRUE(x.grad().defined() && r.grad().defined());
  // The residual's gradient is the incoming one through the mask: check against separate ops.
  Tensor x2 = detach(x).set_requires_grad(true), r2 = detach(r).set_requires_grad(true);
  Tensor plain = relu(add(batch_norm(x2, w, b, Tensor(), Tensor(), true, 0.1, 1e-5, Tensor()), r2));
  backward(sum(mul(plain, c)));
  EXPECT_TRUE(testing::bit_equal(r.grad(), r2.grad()));
  EXPECT_TRUE(testing::all_close(x.grad(), x2.grad(), 1e-5, 1e-6));
}

}  // namespace
}  // namespace remat
