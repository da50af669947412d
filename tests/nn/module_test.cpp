// nn::Module and nn::Sequential: registration and dotted names in PyTorch's order, name errors,
// parameters as leaves, buffers, train/eval propagation, zero_grad, state_dict, access errors;
// and functional_call: the output of the module with substituted weights, gradients that reach
// the substitutes (not the module's own parameters), first and second derivatives through it
// against finite differences, nesting, the module unchanged afterwards, and its errors.
#include "nn/module.h"

#include <functional>

#include "core/cuda.h"
#include "nn/layers.h"
#include "nn/sequential.h"
#include "ops/linalg.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

using testing::all_close;
using testing::bit_equal;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

template <class T>
std::vector<std::string> names_of(const std::vector<std::pair<std::string, T>>& entries) {
  std::vector<std::string> out;
  for (const auto& [n, v] : entries) out.push_back(n);
  return out;
}

// A module with a child registered before its own parameter, a buffer and a nested Sequential.
struct Net : nn::Module {
  Net() : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    scale = register_parameter("scale", ones({3}));
    register_buffer("steps", zeros({1}));
    block = register_module(
        "block", std::make_shared<nn::Sequential>(
                     std::make_shared<nn::Linear>(3, 5), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Dropout>(0.5), std::make_shared<nn::Linear>(5, 2)));
    block->push_back(std::make_shared<nn::BatchNorm2d>(2));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = mul(fc1->forward(x), param("scale"));
    for (std::size_t i = 0; i < 4; ++i) h = (*block)[i]->forward(h);
    return h;
  }
  std::shared_ptr<nn::Linear> fc1;
  std::shared_ptr<nn::Sequential> block;
  Tensor scale;
};

TEST(Module, DottedNamesInPyTorchOrder) {
  auto net = std::make_shared<Net>();
  // Own parameters first, then each child's, depth first (PyTorch's named_parameters).
  EXPECT_EQ(names_of(net->named_parameters()),
            (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "block.0.weight",
                                      "block.0.bias", "block.3.weight", "block.3.bias",
                                      "block.4.weight", "block.4.bias"}));
  EXPECT_EQ(names_of(net->named_parameters(/*recurse=*/false)),
            (std::vector<std::string>{"scale"}));
  EXPECT_EQ(net->parameters().size(), 9u);
  EXPECT_EQ(names_of(net->named_buffers()),
            (std::vector<std::string>{"steps", "block.4.running_mean", "block.4.running_var",
                                      "block.4.num_batches_tracked"}));
  EXPECT_EQ(names_of(net->named_children()), (std::vector<std::string>{"fc1", "block"}));
  EXPECT_EQ(net->children().size(), 2u);
  EXPECT_EQ(names_of(net->named_modules()),
            (std::vector<std::string>{"", "fc1", "block", "block.0", "block.1", "block.2",
                                      "block.3", "block.4"}));
  auto modules = net->named_modules();
  EXPECT_EQ(modules[0].second.get(), net.get());
  EXPECT_EQ(modules[5].second->type_name(), "Dropout");
  // The handles are the registered tensors themselves.
  EXPECT_TRUE(same(net->named_parameters()[1].second, net->fc1->param("weight")));
  EXPECT_TRUE(same(net->scale, net->param("scale")));
}

// to() on the device the module is on changes nothing: the same tensors, still leaves.  Asking
// for a GPU that is not there is an error saying why, and the module is left as it was.
TEST(Module, ToTheSameDeviceKeepsTheTensors) {
  Net net;
  const auto before = net.named_parameters();
  net.to(Device::cpu());
  const auto after = net.named_parameters();
  ASSERT_EQ(before.size(), after.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].second.storage(), after[i].second.storage()) << before[i].first;
    EXPECT_TRUE(after[i].second.requires_grad()) << before[i].first;
  }
  if (cuda::available()) return;
  EXPECT_TRUE(testing::throws_with([&] { net.to(Device::cuda()); }, {"no CUDA device"}));
  for (const auto& [name, p] : net.named_parameters()) EXPECT_TRUE(p.device().is_cpu()) << name;
}

TEST(Module, NamedModulesOfAModuleNotOwnedByASharedPtr) {
  nn::Sequential seq(std::make_shared<nn::ReLU>());
  auto modules = seq.named_modules();
  ASSERT_EQ(modules.size(), 2u);
  EXPECT_EQ(modules[0].second.get(), &seq);
  EXPECT_EQ(modules[1].first, "0");
}

TEST(Module, StateDictHasParametersAndBuffers) {
  Net net;
  auto sd = net.state_dict();
  std::vector<std::string> keys;
  for (auto& [k, v] : sd) keys.push_back(k);
  EXPECT_EQ(keys,
            (std::vector<std::string>{
                "block.0.bias", "block.0.weight", "block.3.bias", "block.3.weight", "block.4.bias",
                "block.4.num_batches_tracked", "block.4.running_mean", "block.4.running_var",
                "block.4.weight", "fc1.bias", "fc1.weight", "scale", "steps"}));
  EXPECT_TRUE(same(sd.at("fc1.weight"), net.fc1->param("weight")));
  EXPECT_TRUE(same(sd.at("steps"), net.buffer("steps")));
}

TEST(Module, SharedSubmoduleIsListedOnce) {
  struct Tied : nn::Module {
    Tied() : Module("Tied") {
      auto fc = std::make_shared<nn::Linear>(2, 2);
      register_module("a", fc);
      register_module("b", fc);
    }
  } tied;
  // As PyTorch: parameters once (an optimizer steps them once), state_dict under every name.
  EXPECT_EQ(names_of(tied.named_parameters()), (std::vector<std::string>{"a.weight", "a.bias"}));
  EXPECT_EQ(names_of(tied.named_modules()), (std::vector<std::string>{"", "a"}));
  EXPECT_EQ(tied.state_dict().size(), 4u);
}

TEST(Module, RegistrationNameErrors) {
  struct Empty : nn::Module {
    Empty() : Module("Empty") {}
    using Module::register_module;
  };
  Empty m;
  m.register_parameter("w", zeros({2}));
  m.register_buffer("b", zeros({2}));
  m.register_module("child", std::make_shared<nn::ReLU>());
  EXPECT_TRUE(throws_with([&] { m.register_parameter("w", zeros({2})); },
                          {"Empty", "'w'", "already", "parameter"}));
  EXPECT_TRUE(
      throws_with([&] { m.register_buffer("w", zeros({2})); }, {"Empty", "'w'", "parameter"}));
  EXPECT_TRUE(
      throws_with([&] { m.register_parameter("b", zeros({2})); }, {"Empty", "'b'", "buffer"}));
  EXPECT_TRUE(throws_with([&] { m.register_module("w", std::make_shared<nn::ReLU>()); },
                          {"Empty", "'w'", "already"}));
  EXPECT_TRUE(throws_with([&] { m.register_parameter("child", zeros({2})); },
                          {"Empty", "'child'", "submodule"}));
  EXPECT_TRUE(throws_with([&] { m.register_parameter("", zeros({2})); }, {"Empty", "empty"}));
  EXPECT_TRUE(
      throws_with([&] { m.register_buffer("a.b", zeros({2})); }, {"Empty", "'a.b'", "'.'"}));
  EXPECT_TRUE(throws_with([&] { m.register_module("x.y", std::make_shared<nn::ReLU>()); },
                          {"Empty", "'x.y'"}));
  EXPECT_TRUE(throws_with([&] { m.register_module("null", std::shared_ptr<nn::ReLU>()); },
                          {"Empty", "null"}));
  EXPECT_TRUE(throws_with([&] { m.register_parameter("idx", zeros({2}, {.dtype = DType::Int64})); },
                          {"Empty", "'idx'", "floating"}));
  EXPECT_TRUE(
      throws_with([&] { m.register_parameter("u", Tensor()); }, {"Empty", "'u'", "undefined"}));
  // A failed registration leaves nothing behind.
  EXPECT_EQ(names_of(m.named_parameters()), (std::vector<std::string>{"w"}));
}

TEST(Module, RegisteredParametersAreDetachedLeaves) {
  struct M : nn::Module {
    M() : Module("M") {}
  } m;
  Tensor a = leaf64({3}, 1);
  Tensor computed = mul(a, 2.0);  // has history
  Tensor p = m.register_parameter("p", computed);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(p.shares_storage_with(computed));
  Tensor frozen = m.register_parameter("frozen", ones({2}), /*requires_grad=*/false);
  EXPECT_FALSE(frozen.requires_grad());
  Tensor b = m.register_buffer("buf", mul(a, 3.0));
  EXPECT_FALSE(b.requires_grad());
  // Gradients reach the parameter, not the tensor it was made from.
  backward(sum(mul(p, p)));
  EXPECT_TRUE(all_close(p.grad(), mul(p, 2.0)));
  EXPECT_FALSE(a.grad().defined());
}

TEST(Module, AccessErrorsNameTheModuleAndTheName) {
  Net net;
  EXPECT_TRUE(throws_with([&] { net.param("nope"); }, {"Net", "'nope'", "scale"}));
  EXPECT_TRUE(throws_with([&] { net.buffer("nope"); }, {"Net", "'nope'", "steps"}));
  EXPECT_TRUE(
      throws_with([&] { net.fc1->param("wieght"); }, {"Linear", "'wieght'", "weight, bias"}));
  EXPECT_TRUE(throws_with([&] { net.set_buffer("nope", zeros({1})); }, {"Net", "'nope'"}));
  EXPECT_TRUE(throws_with([&] { net.set_parameter("nope", zeros({3})); }, {"Net", "'nope'"}));
  EXPECT_TRUE(throws_with([&] { net.set_parameter("scale", zeros({4})); },
                          {"Net", "'scale'", "[3]", "[4]"}));
  EXPECT_TRUE(
      throws_with([&] { net.set_parameter("scale", zeros({3}, {.dtype = DType::Float64})); },
                  {"Net", "'scale'", "float64"}));
  EXPECT_TRUE(throws_with([&] { net.forward(zeros({2, 5})); }, {"Linear", "[2, 5]"}));
  struct NoForward : nn::Module {
    NoForward() : Module("NoForward") {}
  } nf;
  EXPECT_TRUE(throws_with([&] { nf.forward(zeros({1})); }, {"NoForward", "forward"}));
}

TEST(Module, SetParameterCopiesInPlaceAndSetBufferReplaces) {
  Net net;
  Tensor handle = net.parameters()[0];  // "scale", as an optimizer would hold it
  net.set_parameter("scale", tensor<float>({1, 2, 3}));
  EXPECT_TRUE(bit_equal(handle, tensor<float>({1, 2, 3})));
  EXPECT_TRUE(same(handle, net.param("scale")));
  EXPECT_TRUE(handle.requires_grad());
  net.set_buffer("steps", full({1}, 7));
  EXPECT_EQ(net.buffer("steps").item<float>(), 7.0f);
}

TEST(Module, TrainEvalPropagate) {
  auto net = std::make_shared<Net>();
  for (auto& [n, m] : net->named_modules()) EXPECT_TRUE(m->is_training()) << n;
  net->eval();
  for (auto& [n, m] : net->named_modules()) EXPECT_FALSE(m->is_training()) << n;
  // Dropout inside is now the identity: two calls agree.
  Tensor x = randn({6, 4}, {.seed = 3});
  EXPECT_TRUE(bit_equal(net->forward(x), net->forward(x)));
  net->train();
  for (auto& [n, m] : net->named_modules()) EXPECT_TRUE(m->is_training()) << n;
  net->block->eval();
  EXPECT_TRUE(net->is_training());
  EXPECT_FALSE(net->block->at<nn::Dropout>(2)->is_training());
}

TEST(Module, ZeroGradDropsEveryGradient) {
  Net net;
  backward(sum(net.forward(randn({6, 4}, {.seed = 4}))));
  for (auto& [n, p] : net.named_parameters()) {
    if (n.rfind("block.4", 0) != 0) {  // the batch norm is not used by forward
      EXPECT_TRUE(p.grad().defined()) << n;
    }
  }
  net.zero_grad();
  for (auto& [n, p] : net.named_parameters()) EXPECT_FALSE(p.grad().defined()) << n;
}

TEST(Sequential, ChainsAndIndexes) {
  manual_seed(1);
  auto fc1 = std::make_shared<nn::Linear>(4, 3);
  auto fc2 = std::make_shared<nn::Linear>(3, 2);
  nn::Sequential seq{fc1, std::make_shared<nn::Tanh>()};
  auto pushed = seq.push_back(fc2);
  EXPECT_EQ(pushed.get(), fc2.get());
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(seq[1]->type_name(), "Tanh");
  EXPECT_EQ(seq.at<nn::Linear>(2).get(), fc2.get());
  EXPECT_EQ(names_of(seq.named_children()), (std::vector<std::string>{"0", "1", "2"}));
  Tensor x = randn({5, 4}, {.seed = 2});
  EXPECT_TRUE(bit_equal(seq.forward(x), fc2->forward(tanh(fc1->forward(x)))));
  std::size_t count = 0;
  for (const auto& m : seq) count += m != nullptr;
  EXPECT_EQ(count, 3u);

  EXPECT_TRUE(throws_with([&] { (void)seq[3]; }, {"Sequential", "3", "out of range"}));
  EXPECT_TRUE(throws_with([&] { seq.at<nn::ReLU>(1); }, {"Sequential", "Tanh"}));
  EXPECT_TRUE(
      throws_with([&] { seq.push_back(std::shared_ptr<nn::ReLU>()); }, {"Sequential", "null"}));
  nn::Sequential empty;
  EXPECT_TRUE(bit_equal(empty.forward(x), x));
}

// ---------------------------------------------------------------- functional_call

std::shared_ptr<nn::Sequential> mlp(DType dtype = DType::Float32) {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(
          nn::LinearOptions{.in_features = 5, .out_features = 4, .dtype = dtype}),
      std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(
          nn::LinearOptions{.in_features = 4, .out_features = 3, .dtype = dtype}));
}

TEST(FunctionalCall, EqualsTheModuleWithThoseWeights) {
  manual_seed(8);
  auto a = mlp();
  manual_seed(8);
  auto b = mlp();
  const Tensor x = randn({6, 5}, {.seed = 1});
  const Tensor w0 = randn({4, 5}, {.seed = 2}), b0 = randn({4}, {.seed = 3});
  std::map<std::string, Tensor> own;
  for (auto& [n, p] : a->named_parameters()) own[n] = clone(p);
  const Tensor before = a->forward(x);

  Tensor y = nn::functional_call(*a, {{"0.weight", w0}, {"0.bias", b0}}, x);
  b->at<nn::Linear>(0)->set_parameter("weight", w0);
  b->at<nn::Linear>(0)->set_parameter("bias", b0);
  EXPECT_TRUE(bit_equal(y, b->forward(x)));
  EXPECT_FALSE(bit_equal(y, before));

  // The module is unchanged: same values, and its forward uses its own weights again.
  for (auto& [n, p] : a->named_parameters()) EXPECT_TRUE(bit_equal(p, own.at(n))) << n;
  EXPECT_TRUE(bit_equal(a->forward(x), before));
  EXPECT_TRUE(bit_equal(nn::functional_call(*a, {}, x), before));
}

TEST(FunctionalCall, GradientsReachTheSubstitutesNotTheModule) {
  manual_seed(9);
  auto a = mlp();
  manual_seed(9);
  auto b = mlp();
  const Tensor x = randn({6, 5}, {.seed = 1});
  const Tensor w_out = randn({6, 3}, {.seed = 5});
  Tensor w2 = detach(randn({3, 4}, {.seed = 4})).set_requires_grad(true);
  backward(sum(mul(nn::functional_call(*a, {{"2.weight", w2}}, x), w_out)));
  b->at<nn::Linear>(2)->set_parameter("weight", w2);
  backward(sum(mul(b->forward(x), w_out)));

  EXPECT_TRUE(all_close(w2.grad(), b->at<nn::Linear>(2)->param("weight").grad()));
  EXPECT_FALSE(a->at<nn::Linear>(2)->param("weight").grad().defined());
  // Parameters not substituted are used, and get their gradients, as usual.
  EXPECT_TRUE(all_close(a->at<nn::Linear>(0)->param("weight").grad(),
                        b->at<nn::Linear>(0)->param("weight").grad()));
  EXPECT_TRUE(all_close(a->at<nn::Linear>(2)->param("bias").grad(),
                        b->at<nn::Linear>(2)->param("bias").grad()));
}

TEST(FunctionalCall, FirstAndSecondDerivativesMatchFiniteDifferences) {
  manual_seed(10);
  auto m = mlp(DType::Float64);
  const Tensor x = leaf64({3, 5}, 1);
  auto fn = [&](const std::vector<Tensor>& in) {
    return nn::functional_call(*m, {{"0.weight", in[0]}, {"2.weight", in[1]}, {"2.bias", in[2]}},
                               in[3]);
  };
  std::vector<Tensor> inputs{leaf64({4, 5}, 2), leaf64({3, 4}, 3), leaf64({3}, 4), x};
  EXPECT_TRUE(gradcheck(fn, inputs));
  EXPECT_TRUE(gradgradcheck(fn, inputs));
}

TEST(FunctionalCall, UnrolledStepDifferentiatesThroughTheInnerGradient) {
  // outer(W) = sum(f(x2; W - lr * dL(W)/dW)^2) with L(W) = sum(f(x1; W)^2): its gradient needs
  // second derivatives through functional_call.
  manual_seed(11);
  auto m = mlp(DType::Float64);
  const Tensor x1 = detach(leaf64({4, 5}, 5)), x2 = detach(leaf64({4, 5}, 6));
  auto outer = [&](const std::vector<Tensor>& in) {
    // gradcheck evaluates its finite differences without grad mode on plain tensors; the inner
    // gradient needs both.
    GradModeGuard grad_on(true);
    Tensor w = in[0].requires_grad() ? in[0] : detach(in[0]).set_requires_grad(true);
    Tensor inner = sum(pow(nn::functional_call(*m, {{"0.weight", w}}, x1), 2.0));
    Tensor g = grad({inner}, {w}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
    Tensor stepped = sub(w, mul(g, 0.1));
    return pow(nn::functional_call(*m, {{"0.weight", stepped}}, x2), 2.0);
  };
  EXPECT_TRUE(gradcheck(outer, {leaf64({4, 5}, 7)}));
  EXPECT_FALSE(m->at<nn::Linear>(0)->param("weight").grad().defined());
}

TEST(FunctionalCall, LayersWithBuffersAndFloat64Gradients) {
  // Conv2d, BatchNorm2d (training) and LayerNorm, every parameter substituted.
  manual_seed(12);
  auto net = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(nn::Conv2dOptions{.in_channels = 2,
                                                     .out_channels = 3,
                                                     .kernel_size = 3,
                                                     .padding = 1,
                                                     .dtype = DType::Float64}),
      std::make_shared<nn::BatchNorm2d>(
          nn::BatchNorm2dOptions{.num_features = 3, .dtype = DType::Float64}),
      std::make_shared<nn::Tanh>(),
      std::make_shared<nn::LayerNorm>(
          nn::LayerNormOptions{.normalized_shape = {4}, .dtype = DType::Float64}));
  std::vector<std::string> names = names_of(net->named_parameters());
  ASSERT_EQ(names.size(), 6u);
  std::vector<Tensor> inputs;
  std::uint64_t seed = 20;
  for (auto& [n, p] : net->named_parameters())
    inputs.push_back(leaf64(p.shape(), seed++, 0.5, 1.5));
  inputs.push_back(leaf64({2, 2, 3, 4}, seed));
  auto fn = [&](const std::vector<Tensor>& in) {
    std::map<std::string, Tensor> subs;
    for (std::size_t i = 0; i < names.size(); ++i) subs[names[i]] = in[i];
    return nn::functional_call(*net, subs, in.back());
  };
  EXPECT_TRUE(gradcheck(fn, inputs));
  EXPECT_TRUE(gradgradcheck(fn, inputs));
}

TEST(FunctionalCall, NestedCallsInnermostWins) {
  struct Nest : nn::Module {
    Nest() : Module("Nest") {
      a = register_module("a", std::make_shared<nn::Linear>(3, 3));
      b = register_module("b", std::make_shared<nn::Linear>(3, 2));
    }
    Tensor forward(const Tensor& x) override {
      return nn::functional_call(*b, {{"weight", inner_weight}}, a->forward(x));
    }
    std::shared_ptr<nn::Linear> a, b;
    Tensor inner_weight = randn({2, 3}, {.seed = 30});
  };
  manual_seed(13);
  Nest nest;
  const Tensor x = randn({4, 3}, {.seed = 31});
  const Tensor wa = randn({3, 3}, {.seed = 32}), wb = randn({2, 3}, {.seed = 33});
  const Tensor bb = randn({2}, {.seed = 34});
  Tensor y = nn::functional_call(nest, {{"a.weight", wa}, {"b.weight", wb}, {"b.bias", bb}}, x);
  // a.weight from the outer call; b.weight from the inner one; b.bias from the outer one.
  Tensor expected = linear(linear(x, wa, nest.a->param("bias")), nest.inner_weight, bb);
  EXPECT_TRUE(bit_equal(y, expected));
  // After both calls every module reads its own parameters again.
  EXPECT_TRUE(
      bit_equal(nest.a->forward(x), linear(x, nest.a->param("weight"), nest.a->param("bias"))));
  EXPECT_FALSE(bit_equal(nest.a->param("weight"), wa));
}

// Any callable with any inputs and outputs: a loss over two inputs that returns two tensors,
// differentiable with respect to the substitutes, to second order.
TEST(FunctionalCall, AnyCallableWithSeveralInputsAndOutputs) {
  manual_seed(15);
  auto m = mlp(DType::Float64);
  auto two = [&](const Tensor& a, const Tensor& b) {
    return std::pair{m->forward(a), sum(m->forward(b))};
  };
  const Tensor x1 = detach(leaf64({2, 5}, 40)), x2 = detach(leaf64({3, 5}, 41));
  const Tensor w = leaf64({4, 5}, 42);
  auto [y1, s2] = nn::functional_call(*m, {{"0.weight", w}}, two, x1, x2);
  auto [e1, e2] = two(x1, x2);  // the module's own weight
  EXPECT_EQ(y1.shape(), e1.shape());
  EXPECT_FALSE(bit_equal(y1, e1));
  auto fn = [&](const std::vector<Tensor>& in) {
    auto [a, b] = nn::functional_call(*m, {{"0.weight", in[0]}}, two, in[1], x2);
    return add(sum(a), b);
  };
  EXPECT_TRUE(gradcheck(fn, {leaf64({4, 5}, 43), leaf64({2, 5}, 44)}));
  EXPECT_TRUE(gradgradcheck(fn, {leaf64({4, 5}, 43), leaf64({2, 5}, 44)}));
  // A callable returning nothing runs too; an unknown name is still an error.
  int calls = 0;
  nn::functional_call(*m, {{"0.weight", w}}, [&] { ++calls; });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(throws_with(
      [&] {
        nn::functional_call(*m, {{"9.weight", w}}, [] {});
      },
      {"no parameter '9.weight'"}));
}

TEST(FunctionalCall, ErrorsAndRestoreAfterAnException) {
  manual_seed(14);
  auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 2),
                                              std::make_shared<nn::BatchNorm2d>(2));
  auto fc = net->at<nn::Linear>(0);
  const Tensor x = randn({4, 3}, {.seed = 1});
  EXPECT_TRUE(throws_with(
      [&] {
        nn::functional_call(*fc, {{"wieght", zeros({2, 3})}}, x);
      },
      {"functional_call", "Linear", "'wieght'", "weight, bias"}));
  EXPECT_TRUE(throws_with(
      [&] {
        nn::functional_call(*net, {{"weight", zeros({2, 3})}}, x);
      },
      {"functional_call", "'weight'", "0.weight"}));
  EXPECT_TRUE(throws_with(
      [&] {
        nn::functional_call(*net, {{"1.running_mean", zeros({2})}}, x);
      },
      {"functional_call", "'1.running_mean'"}));
  EXPECT_TRUE(throws_with(
      [&] {
        nn::functional_call(*fc, {{"weight", zeros({3, 2})}}, x);
      },
      {"functional_call", "'weight'", "[2, 3]", "[3, 2]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        nn::functional_call(*fc, {{"bias", zeros({2}, {.dtype = DType::Float64})}}, x);
      },
      {"functional_call", "'bias'", "float64"}));
  EXPECT_TRUE(throws_with(
      [&] {
        nn::functional_call(*fc, {{"bias", Tensor()}}, x);
      },
      {"functional_call", "'bias'", "undefined"}));
  // forward throws inside the call (bad input): the substitutes are gone afterwards.
  const Tensor own = fc->param("weight");
  EXPECT_TRUE(throws_with(
      [&] {
        nn::functional_call(*fc, {{"weight", zeros({2, 3})}}, zeros({4, 7}));
      },
      {"Linear", "[4, 7]"}));
  EXPECT_TRUE(same(fc->param("weight"), own));
  EXPECT_TRUE(bit_equal(fc->forward(x), linear(x, own, fc->param("bias"))));
}

}  // namespace
}  // namespace remat
