// nn::clip_grad_norm_ against torch.nn.utils.clip_grad_norm_ (tests/fixtures/gen_activations.py):
// the total norm over all gradients for p = 2, 1 and infinity, and the gradients scaled in place.
#include "nn/clip_grad.h"

#include <limits>

#include "support/test_util.h"

namespace remat {
namespace {

TEST(ClipGradNorm, MatchesPyTorch) {
  const auto cases = testing::load_fixture("activations");
  for (const auto& [tag, p] : std::vector<std::pair<std::string, double>>{
           {"l2", 2.0}, {"l1", 1.0}, {"inf", std::numeric_limits<double>::infinity()}}) {
    const auto& c = testing::find_case(cases, "clip_" + tag);
    Tensor p1 = zeros({2, 2}, {.dtype = DType::Float64}).set_requires_grad(true);
    Tensor p2 = zeros({3}, {.dtype = DType::Float64}).set_requires_grad(true);
    p1.set_grad(clone(c["g1"]));
    p2.set_grad(clone(c["g2"]));
    const double total = nn::clip_grad_norm_({p1, p2}, 5.0, p);
    EXPECT_NEAR(total, c.num("total"), 1e-12) << tag;
    EXPECT_TRUE(testing::all_close(p1.grad(), c["c1"], 1e-12, 1e-12)) << tag;
    EXPECT_TRUE(testing::all_close(p2.grad(), c["c2"], 1e-12, 1e-12)) << tag;
  }
  EXPECT_TRUE(
      testing::throws_with([] { nn::clip_grad_norm_({}, -1.0); }, {"clip_grad_norm_", "max_norm"}));
  EXPECT_EQ(nn::clip_grad_norm_({zeros({2})}, 1.0), 0.0);  // no gradients: nothing to clip
}

}  // namespace
}  // namespace remat
