// Checkpoint regions beyond the reference's table: gradients (first and second order, with and
// without a budget) equal those of the same code without checkpoints; placeholders; nesting;
// replayed randomness; the determinism check; side effects not repeated; the report.
#include <nlohmann/json.hpp>

#include "dtr/pool.h"
#include "nn/layers.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::bit_equal;
using testing::throws_with;

Tensor leaf(const Shape& shape, std::uint64_t seed, DType dtype = DType::Float32) {
  return detach(uniform(shape, -0.5, 0.5, {.dtype = dtype, .seed = seed})).set_requires_grad(true);
}

struct Mlp {
  std::vector<Tensor> params;
  explicit Mlp(std::int64_t width, int layers, DType dtype = DType::Float32) {
    for (int l = 0; l < layers; ++l) {
      params.push_back(leaf({width, width}, 100 + 2 * l, dtype));
      params.push_back(leaf({width}, 101 + 2 * l, dtype));
    }
  }
  // Layer l: the linear map as a SAVE region, the activation recomputed.
  Tensor layer(const Tensor& h, int l, bool regions) const {
    auto lin = [&, l](const Tensor& t) { return linear(t, params[2 * l], params[2 * l + 1]); };
    auto act = [](const Tensor& t) { return tanh(relu(t)); };
    if (!regions) return act(lin(h));
    Tensor c = region(lin, "linear")(h);
    return region(act, "activation", true)(c);
  }
  Tensor forward(const Tensor& x, bool checkpointed, bool regions = true) const {
    Tensor h = x;
    const int n = static_cast<int>(params.size() / 2);
    for (int l = 0; l < n; l += 2) {
      // The replay calls the function again after forward() returned: it captures by value.
      auto block = [self = *this, l, n, regions](const Tensor& in) {
        Tensor t = self.layer(in, l, regions);
        return l + 1 < n ? self.layer(t, l + 1, regions) : t;
      };
      h = checkpointed ? checkpoint(block, h, {.name = "block" + std::to_string(l / 2)}) : block(h);
    }
    return h;
  }
  // Loss and gradients of one step.
  std::vector<Tensor> step(const Tensor& x, bool checkpointed, bool regions = true) const {
    for (const auto& p : params) p.set_grad(Tensor());
    Tensor loss = sum(mul(forward(x, checkpointed, regions), 0.5));
    backward(loss);
    std::vector<Tensor> out{loss};
    for (const auto& p : params) out.push_back(p.grad());
    return out;
  }
};

::testing::AssertionResult all_bit_equal(const std::vector<Tensor>& a,
                                         const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size();
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto r = bit_equal(a[i], b[i]);
    if (!r) return r << " (tensor " << i << ")";
  }
  return ::testing::AssertionSuccess();
}

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    Pool::of(Device::cpu()).configure(DtrConfig{});
    reset_checkpoint_report();
  }
  void TearDown() override { Pool::of(Device::cpu()).configure(DtrConfig{}); }
};

// ---------------------------------------------------------------- gradients

TEST_F(Checkpoint, GradientsEqualThoseWithoutCheckpoints) {
  Mlp mlp(32, 4);
  Tensor x = uniform({16, 32}, -1, 1, {.seed = 7});
  const auto plain = mlp.step(x, false);
  EXPECT_TRUE(all_bit_equal(mlp.step(x, true), plain));
  EXPECT_TRUE(all_bit_equal(mlp.step(x, true, /*regions=*/false), plain));
  EXPECT_EQ(checkpoint_report().forwards, 4u);
  EXPECT_EQ(checkpoint_report().replays, 4u);
}

TEST_F(Checkpoint, CheckpointsLowerThePeakAndKeepOnlyTheSaveRegionsOutputs) {
  Mlp mlp(64, 8);
  Tensor x = uniform({256, 64}, -1, 1, {.seed = 7});
  Pool& pool = Pool::of(Device::cpu());
  auto peak_of = [&](bool checkpointed, bool regions) {
    pool.reset_peak();
    const std::size_t base = pool.resident_bytes();
    mlp.step(x, checkpointed, regions);
    return pool.peak_resident_bytes() - base;
  };
  const std::size_t plain = peak_of(false, false);
  const std::size_t with_regions = peak_of(true, true);
  const std::size_t recompute_all = peak_of(true, false);
  EXPECT_LT(with_regions, plain);
  EXPECT_LT(recompute_all, with_regions);
  // Each SAVE region kept its linear output for the recomputed activation: 8 of 64 KiB.
  const RegionReport* lin = checkpoint_report().find("block0", "linear");
  ASSERT_NE(lin, nullptr);
  EXPECT_EQ(lin->kept_tensors, 2u);
  EXPECT_EQ(lin->kept_bytes, 2u * 256 * 64 * 4);
}

TEST_F(Checkpoint, GradientsUnderATightBudgetAreBitIdentical) {
  Mlp mlp(64, 8);
  Tensor x = uniform({256, 64}, -1, 1, {.seed = 7});
  Pool& pool = Pool::of(Device::cpu());
  pool.reset_peak();
  const std::size_t base = pool.resident_bytes();
  const auto free_run = mlp.step(x, true);
  const std::size_t peak = pool.peak_resident_bytes() - base;
  const std::size_t budget = base + peak * 6 / 10;
  pool.set_budget(budget);
  pool.reset_stats();
  const auto budgeted = mlp.step(x, true);
  EXPECT_GT(pool.stats().evictions, 0u);  // kept tensors are ordinary, evictable cells
  EXPECT_LE(pool.peak_resident_bytes(), budget);
  pool.set_budget(std::nullopt);
  EXPECT_TRUE(all_bit_equal(budgeted, free_run));
  EXPECT_TRUE(all_bit_equal(budgeted, mlp.step(x, false)));
}

TEST_F(Checkpoint, GradcheckThroughCheckpointedRegions) {
  Mlp mlp(5, 4, DType::Float64);
  std::vector<Tensor> inputs{testing::leaf64({3, 5}, 11)};
  for (const auto& p : mlp.params) inputs.push_back(p);
  auto fn = [&](const std::vector<Tensor>& in) {
    Mlp m = mlp;
    m.params.assign(in.begin() + 1, in.end());
    return m.forward(in[0], true);
  };
  EXPECT_TRUE(testing::gradcheck(fn, inputs));
  EXPECT_TRUE(testing::gradgradcheck(fn, inputs));
}

TEST_F(Checkpoint, SecondDerivativesEqualThoseWithoutCheckpoints) {
  Mlp mlp(16, 4, DType::Float64);
  Tensor x = testing::leaf64({8, 16}, 3);
  std::vector<Tensor> wrt{x};
  for (const auto& p : mlp.params) wrt.push_back(p);
  auto second = [&](bool checkpointed) {
    Tensor y = sum(mlp.forward(x, checkpointed));
    // Gradients w.r.t. the weights read the recreated saved inputs: their history must connect.
    auto g = grad({y}, wrt, {}, /*retain_graph=*/true, /*create_graph=*/true);
    Tensor penalty = sum(mul(g[0], g[0]));  // a gradient penalty
    for (std::size_t i = 1; i < g.size(); ++i) penalty = add(penalty, sum(mul(g[i], g[i])));
    auto out = grad({penalty}, wrt);
    out.insert(out.end(), g.begin(), g.end());
    return out;
  };
  EXPECT_TRUE(all_bit_equal(second(true), second(false)));
}

// ---------------------------------------------------------------- placeholders

// A SAVE region whose output plain code reads: placeholder unless declared.
std::vector<Tensor> save_then_plain(const Tensor& x, bool declare) {
  return checkpoint(
      [declare](const std::vector<Tensor>& in) {
        Tensor c = region([](const Tensor& t) { return mul(t, t); }, "square")(in[0]);
        if (declare) recompute_needs_tensor(c);
        return std::vector<Tensor>{exp(mul(c, 3.0))};
      },
      {x}, {.name = "ck"});
}

TEST_F(Checkpoint, KernelOnAPlaceholderNamesTheRegionAndSuggestsRecomputeNeedsTensor) {
  Tensor x = leaf({4}, 1);
  Tensor y = save_then_plain(x, false)[0];
  EXPECT_TRUE(throws_with(
      [&] { backward(sum(y)); },
      {"mul", "placeholder", "SAVE region 'square'", "checkpoint 'ck'", "recompute_needs_tensor"}));
}

TEST_F(Checkpoint, RecomputeNeedsTensorKeepsTheSaveOutput) {
  Tensor x = leaf({4}, 1);
  backward(sum(save_then_plain(x, true)[0]));
  Tensor with_checkpoint = x.grad();
  x.set_grad(Tensor());
  backward(sum(exp(mul(mul(x, x), 3.0))));
  EXPECT_TRUE(bit_equal(with_checkpoint, x.grad()));
  const RegionReport* r = checkpoint_report().find("ck", "square");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kept_tensors, 1u);
  EXPECT_EQ(r->kept_bytes, 16u);
  EXPECT_EQ(r->placeholders, 0u);
}

TEST_F(Checkpoint, PlaceholdersKeepMetadataAndAllowViewsButNoReads) {
  Tensor x = leaf({2, 6}, 1);
  int checked = 0;
  Tensor leaked;
  auto outs = checkpoint(
      [&](const std::vector<Tensor>& in) {
        Tensor c = region([](const Tensor& t) { return mul(t, 2.0); }, "double")(in[0]);
        if (is_recomputing()) {
          leaked = c;
          EXPECT_TRUE(is_placeholder(c));
          EXPECT_EQ(c.shape(), (Shape{2, 6}));
          EXPECT_EQ(c.dtype(), DType::Float32);
          Tensor v = transpose(reshape(c, {3, 4}), 0, 1);
          EXPECT_TRUE(is_placeholder(v));
          EXPECT_EQ(v.shape(), (Shape{4, 3}));
          EXPECT_TRUE(throws_with([&] { c.item<float>(); }, {"item"}) ||
                      throws_with([&] { c.to_vector<float>(); }, {"placeholder", "'double'"}));
          EXPECT_TRUE(throws_with([&] { contiguous(v); }, {"placeholder", "'double'"}));
          EXPECT_TRUE(throws_with(
              [&] {
                NoGradGuard g;
                add_(c, 1.0);
              },
              {"add_", "placeholder"}));
          ++checked;
        } else {
          EXPECT_FALSE(is_placeholder(c));
        }
        return std::vector<Tensor>{exp(in[0]), c};
      },
      {x});
  backward(add(sum(outs[0]), sum(outs[1])));
  EXPECT_EQ(checked, 1);
  // A placeholder that escaped its replay is still an error, not a crash.
  EXPECT_TRUE(throws_with([&] { exp(leaked); }, {"exp", "placeholder", "'double'"}));
  EXPECT_EQ(checkpoint_report().find("checkpoint", "double")->placeholders, 1u);
  EXPECT_FALSE(is_recomputing());
}

// ---------------------------------------------------------------- nesting

TEST_F(Checkpoint, SaveInsideSaveIsPartOfTheOuterRegion) {
  Tensor x = leaf({5}, 2);
  auto fn = [](const Tensor& in) {
    Tensor s = region(
        [](const Tensor& t) { return region([](const Tensor& u) { return exp(u); }, "inner")(t); },
        "outer")(in);
    return region([](const Tensor& t) { return tanh(t); }, "after", true)(s);
  };
  backward(sum(checkpoint(fn, x)));
  Tensor g = x.grad();
  x.set_grad(Tensor());
  backward(sum(fn(x)));
  EXPECT_TRUE(bit_equal(g, x.grad()));
  EXPECT_NE(checkpoint_report().find("checkpoint", "outer"), nullptr);
  EXPECT_EQ(checkpoint_report().find("checkpoint", "inner"), nullptr);
}

TEST_F(Checkpoint, RecomputeInsideSaveIsAnError) {
  Tensor x = leaf({5}, 2);
  auto fn = [](const Tensor& in) {
    return region(
        [](const Tensor& t) {
          return region([](const Tensor& u) { return exp(u); }, "r", true)(t);
        },
        "s")(in);
  };
  EXPECT_TRUE(throws_with([&] { checkpoint(fn, x, {.name = "ck"}); },
                          {"checkpoint 'ck'", "region 'r'", "inside SAVE region 's'"}));
}

TEST_F(Checkpoint, CheckpointInsideCheckpoint) {
  Mlp mlp(16, 6);
  Tensor x = uniform({8, 16}, -1, 1, {.seed = 5});
  auto forward = [&](bool checkpointed) {
    auto inner = [mlp](const Tensor& h) { return mlp.layer(mlp.layer(h, 1, true), 2, true); };
    auto outer = [mlp, inner, checkpointed](const Tensor& h) {
      Tensor a = mlp.layer(h, 0, true);
      Tensor b = checkpointed ? checkpoint(inner, a, {.name = "inner"}) : inner(a);
      return mlp.layer(b, 3, true);
    };
    Tensor h = checkpointed ? checkpoint(outer, x, {.name = "outer"}) : outer(x);
    return sum(mlp.layer(mlp.layer(h, 4, true), 5, true));
  };
  auto grads = [&](bool checkpointed) {
    for (const auto& p : mlp.params) p.set_grad(Tensor());
    backward(forward(checkpointed));
    std::vector<Tensor> g;
    for (const auto& p : mlp.params) g.push_back(p.grad());
    return g;
  };
  EXPECT_TRUE(all_bit_equal(grads(true), grads(false)));
  EXPECT_EQ(checkpoint_report().forwards, 2u);
  EXPECT_EQ(checkpoint_report().replays,
            2u);  // each replays once; the outer replays the inner plainly
}

// ---------------------------------------------------------------- randomness and determinism

TEST_F(Checkpoint, RandomOpsReplayWithTheSameKeys) {
  Mlp mlp(32, 2);
  Tensor x = uniform({16, 32}, -1, 1, {.seed = 9});
  auto step = [&](bool checkpointed) {
    manual_seed(42);
    for (const auto& p : mlp.params) p.set_grad(Tensor());
    auto block = [&](const Tensor& h) {
      return mlp.layer(dropout(mlp.layer(h, 0, true), 0.5, true), 1, true);
    };
    Tensor y = checkpointed ? checkpoint(block, x) : block(x);
    backward(sum(dropout(y, 0.3, true)));
    std::vector<Tensor> out{mlp.params[0].grad(), mlp.params[2].grad()};
    out.push_back(tensor<double>({static_cast<double>(next_rng_key().stream)}));
    return out;
  };
  // Same gradients, and the replay leaves the generator where the plain step leaves it.
  EXPECT_TRUE(all_bit_equal(step(true), step(false)));
}

TEST_F(Checkpoint, DeterminismCheckCatchesADifferentShape) {
  Tensor x = leaf({8}, 3);
  int calls = 0;
  Tensor y =
      checkpoint([&](const Tensor& in) { return exp(slice(in, 0, 0, ++calls == 1 ? 6 : 5)); }, x,
                 {.name = "shifty"});
  EXPECT_TRUE(
      throws_with([&] { backward(sum(y)); }, {"checkpoint 'shifty'", "shape [5]", "shape [6]"}));
}

TEST_F(Checkpoint, DeterminismCheckOfValuesCatchesDifferentValues) {
  Tensor x = leaf({8}, 3);
  auto run = [&](DeterminismCheck check) {
    int calls = 0;
    Tensor y = checkpoint([&](const Tensor& in) { return exp(add(in, ++calls)); }, x,
                          {.name = "drifty", .determinism = check});
    backward(sum(y));
  };
  EXPECT_TRUE(throws_with([&] { run(DeterminismCheck::Values); },
                          {"checkpoint 'drifty'", "not deterministic"}));
  run(DeterminismCheck::Metadata);  // same shapes: only the value check can tell
}

TEST_F(Checkpoint, WithoutPreservingTheGeneratorDropoutDiffersOnReplay) {
  Tensor x = leaf({64}, 3);
  auto run = [&](bool preserve) {
    Tensor y = checkpoint(
        [](const Tensor& in) { return exp(dropout(in, 0.5, true)); }, x,
        {.name = "noisy", .determinism = DeterminismCheck::Values, .preserve_rng = preserve});
    backward(sum(y));
  };
  run(true);
  EXPECT_TRUE(throws_with([&] { run(false); }, {"checkpoint 'noisy'", "not deterministic"}));
}

// ---------------------------------------------------------------- side effects

TEST_F(Checkpoint, ReplayDoesNotUpdateBatchNormStatisticsAgain) {
  auto run = [](bool checkpointed) {
    nn::BatchNorm2d bn(3);
    Tensor w = leaf({3, 3, 1, 1}, 4);
    Tensor x = uniform({4, 3, 5, 5}, -1, 1, {.seed = 6});
    auto fn = [&](const Tensor& in) { return relu(bn.forward(conv2d(in, w))); };
    Tensor y = checkpointed ? checkpoint(fn, x) : fn(x);
    backward(sum(mul(y, y)));
    std::vector<Tensor> out{w.grad()};
    for (const auto& [name, b] : bn.named_buffers()) out.push_back(b);
    return out;
  };
  EXPECT_TRUE(all_bit_equal(run(true), run(false)));
  // num_batches_tracked += 1 and the four running-statistics updates.
  EXPECT_EQ(checkpoint_report().find("checkpoint", "(unmarked)")->side_effects_skipped, 5u);
}

TEST_F(Checkpoint, InPlaceWritesToTensorsTheReplayMadeStillRun) {
  Tensor x = leaf({6}, 8);
  auto fn = [](const Tensor& in) {
    Tensor scale = zeros({6});
    {
      NoGradGuard g;
      add_(scale, 2.0);  // a tensor of this run: part of the computation, replayed
    }
    return exp(mul(in, scale));
  };
  backward(sum(checkpoint(fn, x)));
  Tensor g = x.grad();
  x.set_grad(Tensor());
  backward(sum(fn(x)));
  EXPECT_TRUE(bit_equal(g, x.grad()));
  EXPECT_EQ(checkpoint_report().find("checkpoint", "(unmarked)")->side_effects_skipped, 0u);
}

// ---------------------------------------------------------------- API edges and report

TEST_F(Checkpoint, ReadmeSample) {
  auto conv = std::make_shared<nn::Conv2d>(
      nn::Conv2dOptions{.in_channels = 2, .out_channels = 4, .kernel_size = 3, .padding = 1});
  auto bn = std::make_shared<nn::BatchNorm2d>(4);
  Tensor x = uniform({2, 2, 6, 6}, -1, 1, {.seed = 12});
  auto grads = [&](bool checkpointed) {
    for (const auto& p : conv->parameters()) p.set_grad(Tensor());
    auto block = [conv, bn](const Tensor& in) {
      Tensor c = region([conv](const Tensor& t) { return conv->forward(t); }, "conv")(in);
      return region([bn](const Tensor& t) { return relu(bn->forward(t)); }, "bn_relu", true)(c);
    };
    Tensor y = checkpointed ? checkpoint(block, x, {.name = "block1"}) : block(x);
    backward(sum(mul(y, y)));
    return conv->parameters().front().grad();
  };
  EXPECT_TRUE(bit_equal(grads(true), grads(false)));
  EXPECT_EQ(checkpoint_report().find("block1", "conv")->kept_tensors, 1u);
}

TEST_F(Checkpoint, OutsideACheckpointRegionsJustRunAndWithoutGradModeNothingIsRecorded) {
  Tensor x = leaf({3}, 1);
  EXPECT_TRUE(bit_equal(region([](const Tensor& t) { return exp(t); }, "r")(x), exp(x)));
  recompute_needs_tensor(x);  // no checkpoint: nothing to declare
  {
    NoGradGuard g;
    EXPECT_TRUE(bit_equal(checkpoint([](const Tensor& t) { return exp(t); }, x), exp(x)));
  }
  EXPECT_EQ(checkpoint_report().forwards, 0u);
  EXPECT_TRUE(throws_with([] { region(TensorFn(), "empty"); }, {"region 'empty'", "empty"}));
  EXPECT_TRUE(throws_with([&] { checkpoint([](const Tensor& t) { return t; }, Tensor()); },
                          {"input 0", "undefined"}));
}

TEST_F(Checkpoint, RetainedGraphBackwardsTwiceWithOneReplay) {
  Tensor x = leaf({4}, 2);
  Tensor y = sum(checkpoint([](const Tensor& t) { return exp(tanh(t)); }, x));
  backward({y}, {}, /*retain_graph=*/true);
  backward({y});
  Tensor twice = x.grad();
  x.set_grad(Tensor());
  Tensor z = sum(exp(tanh(x)));
  backward({z}, {}, true);
  backward({z});
  EXPECT_TRUE(bit_equal(twice, x.grad()));
  EXPECT_EQ(checkpoint_report().replays, 1u);
  EXPECT_TRUE(throws_with([&] { backward({y}); }, {"second time"}));
}

TEST_F(Checkpoint, ReportListsKeptAndReplayedPerRegion) {
  Mlp mlp(32, 4);
  mlp.step(uniform({16, 32}, -1, 1, {.seed = 7}), true);
  const auto& report = checkpoint_report();
  const RegionReport* lin = report.find("block1", "linear");
  const RegionReport* act = report.find("block1", "activation");
  ASSERT_TRUE(lin && act);
  EXPECT_FALSE(lin->recompute);
  EXPECT_EQ(lin->kernels_replayed, 0u);
  EXPECT_EQ(lin->kept_tensors, 2u);
  EXPECT_TRUE(act->recompute);
  EXPECT_EQ(act->kernels_replayed, 4u);  // relu and tanh, in two layers
  EXPECT_EQ(act->kept_tensors, 0u);
  const auto json = nlohmann::json::parse(report.to_json());
  EXPECT_EQ(json["forwards"], 2);
  EXPECT_EQ(json["replays"], 2);
  bool found = false;
  for (const auto& r : json["regions"])
    if (r["checkpoint"] == "block1" && r["region"] == "activation") {
      found = true;
      EXPECT_EQ(r["policy"], "recompute");
      EXPECT_EQ(r["kernels_replayed"], 4);
    }
  EXPECT_TRUE(found);
  const std::string text = report.to_string();
  EXPECT_NE(text.find("block1"), std::string::npos);
  EXPECT_NE(text.find("activation"), std::string::npos);
  reset_checkpoint_report();
  EXPECT_TRUE(checkpoint_report().regions.empty());
}

}  // namespace
}  // namespace remat
