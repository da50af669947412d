// View ops (ops/view.h) against PyTorch: values, storage sharing, gradients through views, and
// element-wise ops applied to non-contiguous views.
#include <functional>

#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

using testing::all_close;
using testing::bit_equal;
using testing::find_case;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;

const std::vector<testing::FixtureCase>& fixture() {
  static const auto cases = testing::load_fixture("view");
  return cases;
}

// Runs f, expecting a remat::Error whose message contains every fragment.

class ViewValues : public ::testing::TestWithParam<std::string> {};

TEST_P(ViewValues, MatchPyTorchAndShareTheInputsCell) {
  const auto& c = find_case(fixture(), "views_" + GetParam());
  const Tensor &x = c["x"], &z = c["z"], &b = c["b"];
  // Every one of these is a view of its input's cell.
  const std::vector<std::pair<std::string, std::pair<Tensor, Tensor>>> views = {
      {"reshape_4_6", {reshape(x, {4, 6}), x}},
      {"reshape_m1_4", {reshape(x, {-1, 4}), x}},
      {"flatten", {flatten(x), x}},
      {"flatten_1", {flatten(x, 1), x}},
      {"flatten_0_1", {flatten(x, 0, 1), x}},
      {"expand", {expand(b, {2, 3, 4}), b}},
      {"expand_keep", {expand(b, {-1, 5}), b}},
      {"permute", {permute(x, {2, 0, 1}), x}},
      {"transpose", {transpose(x, 0, 2), x}},
      {"squeeze", {squeeze(z), z}},
      {"squeeze_2", {squeeze(z, 2), z}},
      {"squeeze_1", {squeeze(z, 1), z}},  // size 3: unchanged
      {"unsqueeze_1", {unsqueeze(x, 1), x}},
      {"unsqueeze_m1", {unsqueeze(x, -1), x}},
      {"slice_1_3", {slice(x, 1, 1, 3), x}},
      {"slice_step2", {slice(x, 2, 0, 4, 2), x}},
      {"slice_neg", {slice(x, 1, -2, 3), x}},
      {"slice_neg_step", {slice(x, 2, -3, 4, 2), x}},
      {"slice_neg_end", {slice(x, 1, 0, -1), x}},
      {"slice_step3", {slice(x, 2, 1, 100, 3), x}},
      {"narrow", {narrow(x, 2, 1, 2), x}},
      {"narrow_neg", {narrow(x, 1, -2, 2), x}},
      {"select_m1", {select(x, 1, -1), x}},
      {"select_0_1", {select(x, 0, 1), x}},
      {"slice_of_transpose", {slice(slice(transpose(x, 1, 2), 1, 1, 4), 2, 0, 3, 2), x}},
      {"view", {view(x, {4, 6}), x}},
  };
  for (const auto& [key, pair] : views) {
    const auto& [v, input] = pair;
    const std::string ref = key == "view" ? "reshape_4_6" : key;
    EXPECT_TRUE(bit_equal(v, c[ref])) << key;
    EXPECT_TRUE(v.shares_storage_with(input)) << key << " should be a view";
  }
  // A reshape the strides cannot express copies, as PyTorch's does.
  Tensor copied = reshape(transpose(x, 0, 2), {-1});
  EXPECT_TRUE(bit_equal(copied, c["reshape_transposed"]));
  EXPECT_FALSE(copied.shares_storage_with(x));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ViewValues, ::testing::Values("f32", "f64"));

TEST(ViewOps, ViewStridesFollowTheLayout) {
  Tensor x = zeros({2, 3, 4});
  Tensor t = transpose(x, 0, 2);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  Tensor s = slice(x, 2, 1, 4, 2);
  EXPECT_EQ(s.strides(), (Shape{12, 4, 2}));
  EXPECT_EQ(s.offset(), 1);
  Tensor e = expand(zeros({3, 1}), {2, 3, 4});
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_FALSE(e.is_contiguous());
}

TEST(ViewOps, ViewOfNonViewableStridesThrowsNamingTheShapes) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_TRUE(throws_with([&] { view(transpose(x, 0, 2), {-1}); }, {"view", "[24]", "[4, 3, 2]"}));
  EXPECT_TRUE(throws_with([&] { view(slice(x, 2, 0, 3), {18}); }, {"view", "[18]", "[2, 3, 3]"}));
  // A stepped slice whose steps line up stays viewable.
  EXPECT_TRUE(view(slice(x, 2, 0, 4, 2), {12}).shares_storage_with(x));
  // Splitting a dim of a transposed tensor is still expressible.
  Tensor ok = view(transpose(x, 0, 2), {2, 2, 3, 2});
  EXPECT_TRUE(ok.shares_storage_with(x));
  EXPECT_EQ(ok.strides(), (Shape{2, 1, 4, 12}));
}

TEST(ViewOps, ZeroDimTensorsReshapeAsViews) {
  Tensor s = scalar_tensor(3.5);
  Tensor v = view(s, {1});
  EXPECT_TRUE(v.shares_storage_with(s));
  EXPECT_EQ(v.shape(), (Shape{1}));
  EXPECT_TRUE(unsqueeze(s, 0).shares_storage_with(s));
  EXPECT_TRUE(reshape(s, {1, 1}).shares_storage_with(s));
  EXPECT_EQ(flatten(s).shape(), (Shape{1}));
  Tensor back = reshape(v, {});
  EXPECT_EQ(back.dim(), 0);
  EXPECT_EQ(back.item<float>(), 3.5f);
}

TEST(ViewOps, ContiguousAndCloneCopy) {
  Tensor x = uniform({3, 4}, -1, 1, {.seed = 3});
  EXPECT_TRUE(same(contiguous(x), x));  // already contiguous: the same handle
  Tensor t = transpose(x, 0, 1);
  Tensor c = contiguous(t);
  EXPECT_FALSE(c.shares_storage_with(x));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (Shape{3, 1}));
  EXPECT_TRUE(bit_equal(c, t));
  Tensor k = clone(x);
  EXPECT_FALSE(k.shares_storage_with(x));
  EXPECT_TRUE(bit_equal(k, x));
  Tensor ks = clone(slice(x, 1, 1, 4, 2));
  EXPECT_EQ(ks.shape(), (Shape{3, 2}));
  EXPECT_TRUE(ks.is_contiguous());
  EXPECT_EQ(ks.at<float>({2, 1}), x.at<float>({2, 3}));
}

TEST(ViewOps, ElementwiseOpsOnNonContiguousViewsMatchPyTorch) {
  for (const char* tag : {"f32", "f64"}) {
    const auto& c = find_case(fixture(), std::string("strided_ops_") + tag);
    const Tensor &x = c["x"], &w = c["w"];
    EXPECT_TRUE(all_close(exp(transpose(x, 0, 2)), c["exp_transposed"])) << tag;
    EXPECT_TRUE(all_close(add(slice(x, 1, 0, 3, 2), w), c["add_sliced"])) << tag;
    EXPECT_TRUE(all_close(mul(x, expand(slice(x, 1, 0, 1), {2, 3, 4})), c["mul_expanded"])) << tag;
    EXPECT_TRUE(all_close(tanh(slice(permute(x, {2, 1, 0}), 0, 1, 3)), c["tanh_permuted_slice"]))
        << tag;
    EXPECT_TRUE(bit_equal(contiguous(transpose(x, 1, 2)), c["contiguous_transposed"])) << tag;
  }
}

TEST(ViewOps, BadArgumentsNameTheOpAndShape) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_TRUE(throws_with([&] { reshape(x, {5, -1}); }, {"reshape", "[5, -1]", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_with([&] { reshape(x, {-1, -1}); }, {"reshape", "-1"}));
  EXPECT_TRUE(throws_with([&] { reshape(x, {7, 2}); }, {"reshape", "[7, 2]", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_with([&] { expand(x, {2, 5, 4}); }, {"expand", "[2, 3, 4]", "[2, 5, 4]"}));
  EXPECT_TRUE(throws_with([&] { expand(x, {3, 4}); }, {"expand", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_with([&] { permute(x, {0, 0, 1}); }, {"permute", "repeated"}));
  EXPECT_TRUE(throws_with([&] { permute(x, {0, 1}); }, {"permute", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_with([&] { transpose(x, 0, 3); }, {"transpose", "dim 3"}));
  EXPECT_TRUE(throws_with([&] { select(x, 1, 3); }, {"select", "index 3", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_with([&] { select(x, 1, -4); }, {"select", "index -4"}));
  EXPECT_TRUE(throws_with([&] { narrow(x, 2, 3, 2); }, {"narrow", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_with([&] { slice(x, 0, 0, 2, 0); }, {"slice", "step"}));
  EXPECT_TRUE(throws_with([&] { slice(scalar_tensor(1.0), 0, 0, 1); }, {"slice", "0-dim"}));
  EXPECT_TRUE(throws_with([&] { flatten(x, 2, 1); }, {"flatten", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_with([&] { unsqueeze(x, 4); }, {"unsqueeze", "dim 4"}));
}

// Each case: a view applied to a float64 leaf.  Gradients by finite differences; second
// derivatives through y*y so they pass through the view's backward and its own derivative.
struct GradCase {
  std::string name;
  Shape shape;
  std::function<Tensor(const Tensor&)> fn;
};

std::vector<GradCase> grad_cases() {
  return {
      {"reshape",
       {2, 3, 4},
       [](const Tensor& x) {
         return reshape(x, {4, -1});
       }},
      {"reshape_copy",
       {2, 3, 4},
       [](const Tensor& x) { return reshape(transpose(x, 0, 2), {-1}); }},
      {"view",
       {2, 3, 4},
       [](const Tensor& x) {
         return view(x, {6, 4});
       }},
      {"flatten", {2, 3, 4}, [](const Tensor& x) { return flatten(x, 1); }},
      {"expand",
       {3, 1},
       [](const Tensor& x) {
         return expand(x, {2, 3, 4});
       }},
      {"broadcast_to",
       {4},
       [](const Tensor& x) {
         return broadcast_to(x, {3, 4});
       }},
      {"permute",
       {2, 3, 4},
       [](const Tensor& x) {
         return permute(x, {1, 2, 0});
       }},
      {"transpose", {2, 3, 4}, [](const Tensor& x) { return transpose(x, -1, 0); }},
      {"squeeze", {1, 3, 1}, [](const Tensor& x) { return squeeze(x); }},
      {"squeeze_dim", {1, 3, 1}, [](const Tensor& x) { return squeeze(x, -1); }},
      {"unsqueeze", {2, 3}, [](const Tensor& x) { return unsqueeze(x, 1); }},
      {"slice_step", {3, 7}, [](const Tensor& x) { return slice(x, 1, -6, 7, 3); }},
      {"slice_of_slice",
       {5, 6},
       [](const Tensor& x) { return slice(slice(x, 0, 1, 5, 2), 1, 1, -1, 2); }},
      {"slice_empty_step", {3, 7}, [](const Tensor& x) { return slice(x, 1, 0, 0, 3); }},
      {"narrow", {4, 5}, [](const Tensor& x) { return narrow(x, 0, 1, 2); }},
      {"select", {4, 5}, [](const Tensor& x) { return select(x, 1, -2); }},
      {"contiguous", {3, 4}, [](const Tensor& x) { return contiguous(transpose(x, 0, 1)); }},
      {"clone", {3, 4}, [](const Tensor& x) { return clone(slice(x, 1, 0, 4, 2)); }},
      {"expand_of_slice",
       {3, 4},
       [](const Tensor& x) {
         return expand(slice(x, 1, 2, 3), {2, 3, 5});
       }},
  };
}

TEST(ViewOps, GradientsThroughViewsMatchFiniteDifferences) {
  std::uint64_t seed = 100;
  for (const auto& gc : grad_cases()) {
    Tensor x = leaf64(gc.shape, ++seed);
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return gc.fn(in[0]); }, {x}))
        << gc.name;
    EXPECT_TRUE(gradgradcheck(
        [&](const std::vector<Tensor>& in) {
          Tensor y = gc.fn(in[0]);
          return mul(y, y);
        },
        {x}))
        << gc.name;
  }
}

TEST(ViewOps, GradientOfExpandSumsOverBroadcastDims) {
  Tensor x = leaf64({3, 1}, 9);
  Tensor y = expand(x, {2, 3, 4});
  backward(sum(y));
  EXPECT_TRUE(all_close(x.grad(), full({3, 1}, 8.0, {.dtype = DType::Float64})));
}

TEST(ViewOps, GradientOfSlicePlacesZerosOutside) {
  Tensor x = leaf64({2, 6}, 10);
  backward(sum(slice(x, 1, 1, 6, 2)));
  const std::vector<double> expected = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
  EXPECT_TRUE(all_close(x.grad(), tensor<double>(expected, Shape{2, 6})));
}

}  // namespace
}  // namespace remat
