// Learning-rate schedules (nn/lr_scheduler.h) against torch.optim.lr_scheduler in PyTorch 1.13:
// StepLR, CosineAnnealingLR (also past T_max), LinearLR up and down, and SequentialLR warm-up
// hand-overs, on an optimizer with two groups of different lr; plus argument errors.
#include "nn/lr_scheduler.h"

#include <functional>
#include <memory>

#include "support/test_util.h"

namespace remat {
namespace {

using testing::find_case;
using testing::FixtureCase;
using testing::throws_with;

const std::vector<FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("optim");
  return cases;
}

// The fixture's optimizer: two groups with lr 0.1 and 0.05.
struct TwoGroups {
  Tensor w = zeros({1}, {.requires_grad = true});
  Tensor v = zeros({1}, {.requires_grad = true});
  nn::SGD opt{{w}, {.lr = 0.1}};
  TwoGroups() { opt.add_param_group({v}, {.lr = 0.05}); }
};

// Steps the scheduler and compares both groups' lr with PyTorch's after every step (row 0:
// right after construction).  The formulas are evaluated in PyTorch's order, so the doubles
// agree to the last bit or two.
void check(const std::string& name,
           const std::function<std::shared_ptr<nn::LRScheduler>(nn::Optimizer&)>& make) {
  SCOPED_TRACE(name);
  const auto& c = find_case(fixture(), name);
  const auto expected = c["lrs"].to_vector<double>();
  const auto steps = static_cast<std::size_t>(c.num("steps"));
  ASSERT_EQ(expected.size(), 2 * (steps + 1));
  TwoGroups g;
  auto sched = make(g.opt);
  for (std::size_t k = 0; k <= steps; ++k) {
    if (k > 0) {
      g.opt.step();
      sched->step();
    }
    for (std::size_t group = 0; group < 2; ++group) {
      const double want = expected[2 * k + group];
      EXPECT_NEAR(g.opt.lr(group), want, 1e-15 * want + 1e-18)
          << "after " << k << " steps, group " << group;
      EXPECT_EQ(sched->get_last_lr().at(group), g.opt.lr(group));
    }
  }
}

TEST(LRScheduler, StepLR) {
  check("step_lr", [](nn::Optimizer& o) { return std::make_shared<nn::StepLR>(o, 3, 0.5); });
}

TEST(LRScheduler, CosineAnnealing) {
  check("cosine",
        [](nn::Optimizer& o) { return std::make_shared<nn::CosineAnnealingLR>(o, 10, 0.001); });
  check("cosine_zero_min",
        [](nn::Optimizer& o) { return std::make_shared<nn::CosineAnnealingLR>(o, 7); });
}

TEST(LRScheduler, LinearWarmup) {
  check("linear",
        [](nn::Optimizer& o) { return std::make_shared<nn::LinearWarmup>(o, 0.1, 1.0, 5); });
  check("linear_down",
        [](nn::Optimizer& o) { return std::make_shared<nn::LinearLR>(o, 1.0, 0.25, 4); });
}

TEST(LRScheduler, WarmupThenCosine) {
  check("warmup_cosine", [](nn::Optimizer& o) { return nn::warmup_cosine(o, 4, 0.25, 8, 1e-4); });
  check("warmup_cosine", [](nn::Optimizer& o) {
    auto warm = std::make_shared<nn::LinearLR>(o, 0.25, 1.0, 4);
    auto cos = std::make_shared<nn::CosineAnnealingLR>(o, 8, 1e-4);
    return std::make_shared<nn::SequentialLR>(
        o, std::vector<std::shared_ptr<nn::LRScheduler>>{warm, cos}, std::vector<std::int64_t>{4});
  });
}

// A run too short for any warm-up (train_resnet --steps 1 or --warmup 0) is the cosine alone.
TEST(LRScheduler, NoWarmupIsTheCosineAlone) {
  TwoGroups a, b;
  auto warm = nn::warmup_cosine(a.opt, 0, 0.1, 6, 1e-3);
  nn::CosineAnnealingLR cosine(b.opt, 6, 1e-3);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(a.opt.lr(0), b.opt.lr(0)) << "step " << i;
    EXPECT_EQ(a.opt.lr(1), b.opt.lr(1)) << "step " << i;
    a.opt.step();
    b.opt.step();
    warm->step();
    cosine.step();
  }
}

TEST(LRScheduler, SequentialOfThree) {
  check("warmup_step_cosine", [](nn::Optimizer& o) {
    auto warm = std::make_shared<nn::LinearLR>(o, 0.5, 1.0, 2);
    auto step = std::make_shared<nn::StepLR>(o, 2, 0.3);
    auto cos = std::make_shared<nn::CosineAnnealingLR>(o, 5);
    return std::make_shared<nn::SequentialLR>(
        o, std::vector<std::shared_ptr<nn::LRScheduler>>{warm, step, cos},
        std::vector<std::int64_t>{3, 7});
  });
}

TEST(LRScheduler, InitialLrIsSharedAndSaved) {
  TwoGroups g;
  nn::StepLR first(g.opt, 1, 0.5);
  g.opt.step();
  first.step();
  EXPECT_EQ(g.opt.lr(0), 0.05);
  // A second scheduler starts from the initial lr the first one recorded, as in PyTorch.
  nn::CosineAnnealingLR second(g.opt, 4);
  EXPECT_EQ(second.base_lrs(), (std::vector<double>{0.1, 0.05}));
  EXPECT_EQ(g.opt.initial_lr(1), 0.05);
  EXPECT_EQ(g.opt.state_dict().at("param_groups.1.initial_lr").item<double>(), 0.05);
}

TEST(LRScheduler, BadArgumentsAreClearErrors) {
  TwoGroups g;
  EXPECT_TRUE(throws_with([&] { nn::StepLR(g.opt, 0); }, {"StepLR", "step_size", "0"}));
  EXPECT_TRUE(throws_with([&] { nn::StepLR(g.opt, 2, -0.5); }, {"StepLR", "gamma"}));
  EXPECT_TRUE(
      throws_with([&] { nn::CosineAnnealingLR(g.opt, 0); }, {"CosineAnnealingLR", "T_max"}));
  EXPECT_TRUE(throws_with([&] { nn::CosineAnnealingLR(g.opt, 5, -1.0); },
                          {"CosineAnnealingLR", "eta_min"}));
  EXPECT_TRUE(
      throws_with([&] { nn::LinearLR(g.opt, 0.0); }, {"LinearLR", "start_factor", "(0, 1]"}));
  EXPECT_TRUE(
      throws_with([&] { nn::LinearLR(g.opt, 0.5, 1.5); }, {"LinearLR", "end_factor", "1.5"}));
  EXPECT_TRUE(throws_with([&] { nn::LinearLR(g.opt, 0.5, 1.0, 0); }, {"LinearLR", "total_iters"}));
  auto a = std::make_shared<nn::StepLR>(g.opt, 2);
  auto b = std::make_shared<nn::StepLR>(g.opt, 3);
  using List = std::vector<std::shared_ptr<nn::LRScheduler>>;
  EXPECT_TRUE(throws_with(
      [&] {
        nn::SequentialLR(g.opt, List{a, b}, {});
      },
      {"SequentialLR", "2 schedulers", "0 milestones"}));
  EXPECT_TRUE(throws_with(
      [&] {
        nn::SequentialLR(g.opt, List{a, b, a}, {3, 2});
      },
      {"SequentialLR", "increasing"}));
  TwoGroups other;
  auto foreign = std::make_shared<nn::StepLR>(other.opt, 2);
  EXPECT_TRUE(throws_with(
      [&] {
        nn::SequentialLR(g.opt, List{a, foreign}, {2});
      },
      {"SequentialLR", "scheduler 1", "different optimizer"}));
  EXPECT_TRUE(throws_with([&] { nn::warmup_cosine(g.opt, -1, 0.1, 10); },
                          {"warmup_cosine", "warmup_steps", "-1"}));
}

}  // namespace
}  // namespace remat
