// Data loading (nn/data.h, nn/transforms.h): DataLoader batch sizes, drop_last and the last
// partial batch, every example exactly once per epoch, shuffling reproducible per seed and
// different across epochs and seeds (and uniform over permutations), TensorDataset, Subset and
// the default get_batch; Normalize against the closed form, RandomCrop against a window of the
// zero-padded input, flips, reproducibility, replay after eviction, and errors.
#include "nn/data.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "dtr/cell.h"
#include "nn/transforms.h"
#include "support/test_util.h"

namespace remat::nn {
namespace {

using testing::throws_with;

using testing::bit_equal;

// Row i holds i * 100 + j, target i: every batch row says which example it came from.
TensorDataset numbered(std::int64_t n, std::int64_t features = 3) {
  std::vector<float> x;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < features; ++j) x.push_back(static_cast<float>(i * 100 + j));
  std::vector<std::int64_t> y(static_cast<std::size_t>(n));
  std::iota(y.begin(), y.end(), std::int64_t{0});
  return TensorDataset(tensor<float>(x, Shape{n, features}), tensor<std::int64_t>(y, Shape{n}));
}

// The targets of one epoch, batch by batch; also checks each row against its target.
std::vector<std::vector<std::int64_t>> epoch_targets(DataLoader& loader) {
  std::vector<std::vector<std::int64_t>> out;
  for (const Batch& b : loader) {
    EXPECT_EQ(b.targets.dtype(), DType::Int64);
    EXPECT_EQ(b.targets.dim(), 1);
    const auto t = b.targets.to_vector<std::int64_t>();
    const auto x = b.inputs.to_vector<float>();
    const std::int64_t f = b.inputs.size(1);
    for (std::size_t r = 0; r < t.size(); ++r)
      for (std::int64_t j = 0; j < f; ++j)
        EXPECT_EQ(x[r * static_cast<std::size_t>(f) + static_cast<std::size_t>(j)],
                  static_cast<float>(t[r] * 100 + j));
    out.push_back(t);
  }
  return out;
}

std::vector<std::int64_t> flat(const std::vector<std::vector<std::int64_t>>& batches) {
  std::vector<std::int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

std::vector<std::int64_t> sizes(const std::vector<std::vector<std::int64_t>>& batches) {
  std::vector<std::int64_t> s;
  for (const auto& b : batches) s.push_back(static_cast<std::int64_t>(b.size()));
  return s;
}

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), std::int64_t{0});
  return v;
}

TEST(DataLoader, SequentialBatchesWithLastPartialBatch) {
  DataLoader loader(numbered(10), {.batch_size = 3});
  EXPECT_EQ(loader.num_batches(), 4);
  const auto batches = epoch_targets(loader);
  EXPECT_EQ(sizes(batches), (std::vector<std::int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(flat(batches), iota(10));
  // Batch shapes: inputs [B, 3], targets [B].
  auto it = loader.begin();
  EXPECT_EQ(it->inputs.shape(), (Shape{3, 3}));
  EXPECT_EQ(it->targets.shape(), (Shape{3}));
}

TEST(DataLoader, DropLastDropsOnlyThePartialBatch) {
  DataLoader loader(numbered(10), {.batch_size = 3, .drop_last = true});
  EXPECT_EQ(loader.num_batches(), 3);
  const auto batches = epoch_targets(loader);
  EXPECT_EQ(sizes(batches), (std::vector<std::int64_t>{3, 3, 3}));
  EXPECT_EQ(flat(batches), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));

  DataLoader even(numbered(9), {.batch_size = 3, .drop_last = true});
  EXPECT_EQ(sizes(epoch_targets(even)), (std::vector<std::int64_t>{3, 3, 3}));
  DataLoader small(numbered(2), {.batch_size = 3, .drop_last = true});
  EXPECT_EQ(small.num_batches(), 0);
  EXPECT_TRUE(epoch_targets(small).empty());
}

TEST(DataLoader, ShuffledEpochVisitsEveryExampleOnce) {
  DataLoader loader(numbered(103), {.batch_size = 10, .shuffle = true, .seed = 42});
  for (int epoch = 0; epoch < 3; ++epoch) {
    const auto batches = epoch_targets(loader);
    EXPECT_EQ(sizes(batches).back(), 3);
    auto all = flat(batches);
    EXPECT_NE(all, iota(103)) << "epoch " << epoch << " was not shuffled";
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, iota(103)) << "epoch " << epoch;
  }
  DataLoader dropping(numbered(103),
                      {.batch_size = 10, .shuffle = true, .drop_last = true, .seed = 42});
  auto all = flat(epoch_targets(dropping));
  EXPECT_EQ(all.size(), 100u);
  EXPECT_EQ(std::set<std::int64_t>(all.begin(), all.end()).size(), 100u);
}

TEST(DataLoader, ShuffleIsReproducibleAndDiffersAcrossEpochsAndSeeds) {
  auto ds = std::make_shared<TensorDataset>(numbered(50));
  DataLoader a(ds, {.batch_size = 7, .shuffle = true, .seed = 5});
  DataLoader b(ds, {.batch_size = 7, .shuffle = true, .seed = 5});
  DataLoader c(ds, {.batch_size = 7, .shuffle = true, .seed = 6});
  const auto a0 = flat(epoch_targets(a)), a1 = flat(epoch_targets(a));
  const auto b0 = flat(epoch_targets(b)), b1 = flat(epoch_targets(b));
  const auto c0 = flat(epoch_targets(c));
  EXPECT_EQ(a0, b0);
  EXPECT_EQ(a1, b1);
  EXPECT_NE(a0, a1);
  EXPECT_NE(a0, c0);
  EXPECT_EQ(a0, a.order(0));
  EXPECT_EQ(a1, a.order(1));
  EXPECT_EQ(a.next_epoch(), 2u);
  // Resuming at epoch 1 replays that epoch's order; batch() gives the same batches.
  b.set_epoch(1);
  EXPECT_EQ(flat(epoch_targets(b)), a1);
  EXPECT_TRUE(bit_equal(a.batch(1, 2).targets, tensor<std::int64_t>(std::vector<std::int64_t>(
                                                   a1.begin() + 14, a1.begin() + 21))));
}

// Fisher-Yates with unbiased draws gives each of the 24 orders of 4 items with probability
// 1/24; over 4800 epochs each count is Binomial(4800, 1/24): mean 200, sd 14.
TEST(DataLoader, ShuffleIsUniformOverPermutations) {
  DataLoader loader(numbered(4), {.batch_size = 4, .shuffle = true, .seed = 9});
  std::map<std::vector<std::int64_t>, int> counts;
  for (std::uint64_t e = 0; e < 4800; ++e) ++counts[loader.order(e)];
  EXPECT_EQ(counts.size(), 24u);
  for (const auto& [perm, n] : counts) {
    EXPECT_GT(n, 200 - 6 * 14) << fmt::format("{}", perm);
    EXPECT_LT(n, 200 + 6 * 14) << fmt::format("{}", perm);
  }
}

TEST(DataLoader, EmptyDatasetHasNoBatches) {
  TensorDataset empty(zeros({0, 3}), zeros({0}, {.dtype = DType::Int64}));
  DataLoader loader(empty, {.batch_size = 4, .shuffle = true});
  EXPECT_EQ(loader.num_batches(), 0);
  EXPECT_TRUE(loader.begin() == loader.end());
}

TEST(DataLoader, Errors) {
  EXPECT_TRUE(throws_with([] { DataLoader(numbered(3), {.batch_size = 0}); },
                          {"DataLoader", "batch_size", "0"}));
  EXPECT_TRUE(throws_with([] { DataLoader(std::shared_ptr<const Dataset>(), {}); },
                          {"DataLoader", "null"}));
  DataLoader loader(numbered(5), {.batch_size = 2});
  EXPECT_TRUE(throws_with([&] { loader.batch(0, 3); }, {"DataLoader", "batch 3", "3"}));
  auto end = loader.end();
  EXPECT_TRUE(throws_with([&] { (void)*end; }, {"DataLoader", "past the end"}));
}

// The loader's batches are op outputs on the dataset tensor: under a budget too small to hold
// them all they are evicted and recomputed, with the same values.
TEST(DataLoader, SameBatchesUnderATightBudget) {
  auto ds = std::make_shared<TensorDataset>(numbered(400, 64));
  DataLoader loader(ds, {.batch_size = 32, .shuffle = true, .seed = 3});
  std::vector<std::vector<float>> expected;
  for (const Batch& b : loader) expected.push_back(b.inputs.to_vector<float>());

  Pool& pool = Pool::of(Device::cpu());
  struct Reset {
    Pool& pool;
    ~Reset() { pool.set_budget(std::nullopt); }
  } reset{pool};
  const DtrStats before = pool.total_stats();
  pool.set_budget(pool.resident_bytes() + 4 * 32 * 64 * 4);
  loader.set_epoch(0);
  std::vector<Batch> kept;
  for (const Batch& b : loader) kept.push_back(b);  // more batches than the budget holds
  ASSERT_EQ(kept.size(), expected.size());
  for (std::size_t i = 0; i < kept.size(); ++i)
    EXPECT_EQ(kept[i].inputs.to_vector<float>(), expected[i]) << "batch " << i;
  const DtrStats after = pool.total_stats();
  EXPECT_GT(after.evictions, before.evictions);
  EXPECT_GT(after.rematerializations, before.rematerializations);
}

TEST(TensorDataset, GetAndGetBatch) {
  TensorDataset ds = numbered(6, 2);
  EXPECT_EQ(ds.size(), 6);
  const Example e = ds.get(4);
  EXPECT_EQ(e.input.shape(), (Shape{2}));
  EXPECT_EQ(e.input.to_vector<float>(), (std::vector<float>{400, 401}));
  EXPECT_EQ(e.target.item<std::int64_t>(), 4);
  const std::vector<std::int64_t> idx{5, 0, 5};
  const Batch b = ds.get_batch(idx);
  EXPECT_EQ(b.inputs.to_vector<float>(), (std::vector<float>{500, 501, 0, 1, 500, 501}));
  EXPECT_EQ(b.targets.to_vector<std::int64_t>(), idx);
}

TEST(TensorDataset, Errors) {
  EXPECT_TRUE(throws_with(
      [] {
        TensorDataset(zeros({4, 2}), zeros({3}));
      },
      {"TensorDataset", "[4, 2]", "[3]", "4 vs 3"}));
  EXPECT_TRUE(throws_with([] { TensorDataset(scalar_tensor(1), zeros({3})); },
                          {"TensorDataset", "first dim"}));
  TensorDataset ds = numbered(3);
  EXPECT_TRUE(throws_with([&] { ds.get(3); }, {"TensorDataset::get", "index 3", "3 examples"}));
  EXPECT_TRUE(throws_with([&] { ds.get(-1); }, {"index -1"}));
  const std::vector<std::int64_t> bad{0, 7};
  EXPECT_TRUE(throws_with([&] { ds.get_batch(bad); }, {"TensorDataset::get_batch", "index 7"}));
}

TEST(Subset, FirstAndGivenIndices) {
  auto base = std::make_shared<TensorDataset>(numbered(10));
  Subset head = Subset::first(base, 4);
  EXPECT_EQ(head.size(), 4);
  EXPECT_EQ(Subset::first(base, 50).size(), 10);
  DataLoader loader(head, {.batch_size = 3});
  EXPECT_EQ(flat(epoch_targets(loader)), iota(4));

  Subset picked(base, {7, 2, 2, 9});
  EXPECT_EQ(picked.get(0).target.item<std::int64_t>(), 7);
  const std::vector<std::int64_t> idx{3, 1, 0};
  EXPECT_EQ(picked.get_batch(idx).targets.to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{9, 2, 7}));
  // A subset of a subset.
  Subset nested(std::make_shared<Subset>(picked), {3, 0});
  EXPECT_EQ(nested.get(0).target.item<std::int64_t>(), 9);

  EXPECT_TRUE(throws_with([&] { Subset(base, {1, 10}); }, {"Subset", "index 10", "10 examples"}));
  EXPECT_TRUE(throws_with([&] { picked.get(4); }, {"Subset::get", "index 4"}));
  EXPECT_TRUE(throws_with([&] { Subset::first(base, -1); }, {"Subset::first", "-1"}));
}

// A dataset that only implements get(): the default get_batch stacks its examples.
class Squares : public Dataset {
 public:
  explicit Squares(std::int64_t n, bool ragged = false) : n_(n), ragged_(ragged) {}
  std::int64_t size() const override { return n_; }
  Example get(std::int64_t i) const override {
    REMAT_CHECK(i >= 0 && i < n_, "Squares: index {}", i);
    const std::int64_t len = ragged_ && i == 2 ? 3 : 2;
    std::vector<double> v;
    for (std::int64_t j = 0; j < len; ++j) v.push_back(static_cast<double>(i * i + j));
    // A transposed view, so the default path must handle non-contiguous examples.
    Tensor x = transpose(tensor<double>(v, Shape{len, 1}), 0, 1);
    return {x, tensor<std::int64_t>({i % 3}, Shape{})};
  }

 private:
  std::int64_t n_;
  bool ragged_;
};

TEST(Dataset, DefaultGetBatchStacksExamples) {
  Squares ds(5);
  const std::vector<std::int64_t> idx{4, 1, 3};
  const Batch b = ds.get_batch(idx);
  EXPECT_EQ(b.inputs.shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(b.inputs.dtype(), DType::Float64);
  EXPECT_EQ(b.inputs.to_vector<double>(), (std::vector<double>{16, 17, 1, 2, 9, 10}));
  EXPECT_EQ(b.targets.shape(), (Shape{3}));
  EXPECT_EQ(b.targets.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 1, 0}));

  DataLoader loader(Squares(5), {.batch_size = 2, .shuffle = true, .seed = 1});
  std::vector<double> firsts;
  for (const Batch& batch : loader) {
    const auto v = batch.inputs.to_vector<double>();
    for (std::size_t r = 0; r < v.size(); r += 2) firsts.push_back(v[r]);
  }
  std::sort(firsts.begin(), firsts.end());
  EXPECT_EQ(firsts, (std::vector<double>{0, 1, 4, 9, 16}));

  Squares ragged(5, true);
  const std::vector<std::int64_t> mixed{1, 2};
  EXPECT_TRUE(throws_with([&] { ragged.get_batch(mixed); },
                          {"get_batch", "example 2", "[1, 3]", "example 1", "[1, 2]"}));
  const std::vector<std::int64_t> out_of_range{1, 5};
  EXPECT_TRUE(throws_with([&] { ds.get_batch(out_of_range); }, {"get_batch", "index 5"}));
}

// ---------------------------------------------------------------- transforms

// Distinct non-zero values, so a zero means padding and a window identifies its position.
Tensor distinct_images(const Shape& shape) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), 1.0f);
  return tensor<float>(v, shape);
}

TEST(Normalize, MatchesClosedFormExactly) {
  const std::vector<double> mean{0.485, 0.456, 0.406}, std{0.229, 0.224, 0.225};
  Normalize norm(mean, std);
  for (const DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = uniform({4, 3, 5, 6}, 0, 1, {.dtype = dt, .seed = 1});
    Tensor y = norm.apply(x, 0);
    ASSERT_EQ(y.shape(), x.shape());
    ASSERT_EQ(y.dtype(), dt);
    const auto xs = x.to_vector<double>(), ys = y.to_vector<double>();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const std::size_t c = (i / 30) % 3;
      const double expected =
          dt == DType::Float32
              ? static_cast<double>((static_cast<float>(xs[i]) - static_cast<float>(mean[c])) /
                                    static_cast<float>(std[c]))
              : (xs[i] - mean[c]) / std[c];
      ASSERT_EQ(ys[i], expected) << "element " << i << " channel " << c;
    }
  }
}

TEST(Normalize, Errors) {
  EXPECT_TRUE(throws_with([] { Normalize({0.5, 0.5}, {1.0}); }, {"Normalize", "2 means", "1 std"}));
  EXPECT_TRUE(throws_with([] { Normalize({0.5}, {0.0}); }, {"Normalize", "channel 0", "std"}));
  Normalize norm({0.5, 0.5}, {0.2, 0.2});
  EXPECT_TRUE(throws_with(
      [&] {
        norm.apply(zeros({2, 3, 4, 4}), 0);
      },
      {"Normalize", "[2, 3, 4, 4]", "2 channels"}));
  EXPECT_TRUE(throws_with(
      [&] {
        norm.apply(zeros({2, 2}, {.dtype = DType::Int64}), 0);
      },
      {"Normalize", "floating"}));
}

// out[b, c, r, q] == padded[b, c, r + top, q + left], padded = x with `pad` zeros around H, W.
float padded_at(const std::vector<float>& x, const Shape& s, std::int64_t pad, std::int64_t plane,
                std::int64_t r, std::int64_t q) {
  const std::int64_t h = s[2], w = s[3], y = r - pad, c = q - pad;
  if (y < 0 || y >= h || c < 0 || c >= w) return 0.0f;
  return x[static_cast<std::size_t>(plane * h * w + y * w + c)];
}

TEST(RandomCrop, OutputIsAWindowOfTheZeroPaddedInput) {
  const Shape s{6, 2, 5, 7};
  const std::int64_t size = 5, pad = 2;
  Tensor x = distinct_images(s);
  RandomCrop crop(size, pad, 11);
  Tensor y = crop.apply(x, 3);
  ASSERT_EQ(y.shape(), (Shape{6, 2, 5, 5}));
  const auto xs = x.to_vector<float>(), ys = y.to_vector<float>();
  for (std::int64_t b = 0; b < 6; ++b) {
    const auto off = crop.offset(3, b, 5, 7);
    ASSERT_TRUE(off[0] >= 0 && off[0] <= 5 + 2 * pad - size && off[1] >= 0 &&
                off[1] <= 7 + 2 * pad - size);
    for (std::int64_t c = 0; c < 2; ++c)
      for (std::int64_t r = 0; r < size; ++r)
        for (std::int64_t q = 0; q < size; ++q)
          ASSERT_EQ(ys[static_cast<std::size_t>(((b * 2 + c) * size + r) * size + q)],
                    padded_at(xs, s, pad, b * 2 + c, r + off[0], q + off[1]))
              << "sample " << b << " channel " << c << " at " << r << "," << q << " offset "
              << off[0] << "," << off[1];
  }
}

// Without using offset(): each output equals exactly one window of the padded input, and over
// many examples every one of the 5 x 5 positions occurs.
TEST(RandomCrop, EveryPositionOccurs) {
  const Shape s{300, 1, 4, 4};
  const std::int64_t size = 4, pad = 2;
  Tensor x = distinct_images(s);
  const auto xs = x.to_vector<float>();
  const auto ys = RandomCrop(size, pad, 1).apply(x, 0).to_vector<float>();
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (std::int64_t b = 0; b < 300; ++b) {
    int matches = 0;
    for (std::int64_t top = 0; top <= 2 * pad; ++top)
      for (std::int64_t left = 0; left <= 2 * pad; ++left) {
        bool eq = true;
        for (std::int64_t r = 0; eq && r < size; ++r)
          for (std::int64_t q = 0; eq && q < size; ++q)
            eq = ys[static_cast<std::size_t>((b * size + r) * size + q)] ==
                 padded_at(xs, s, pad, b, r + top, q + left);
        if (eq) {
          ++matches;
          seen.insert({top, left});
        }
      }
    ASSERT_EQ(matches, 1) << "sample " << b;
  }
  EXPECT_EQ(seen.size(), 25u);
}

TEST(RandomCrop, FullSizeWithoutPaddingIsIdentityAndOtherDtypesWork) {
  Tensor x = distinct_images({3, 2, 4, 4});
  EXPECT_TRUE(bit_equal(RandomCrop(4, 0, 5).apply(x, 0), x));
  Tensor xi = tensor<std::int64_t>(iota(2 * 3 * 3), Shape{2, 3, 3});  // [B, H, W]
  Tensor yi = RandomCrop(2, 1, 5).apply(xi, 0);
  EXPECT_EQ(yi.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(yi.dtype(), DType::Int64);
}

TEST(RandomCrop, Errors) {
  EXPECT_TRUE(throws_with([] { RandomCrop(0); }, {"RandomCrop", "size"}));
  EXPECT_TRUE(throws_with([] { RandomCrop(3, -1); }, {"RandomCrop", "padding", "-1"}));
  RandomCrop crop(10, 1);
  EXPECT_TRUE(throws_with(
      [&] {
        crop.apply(zeros({2, 1, 7, 8}), 0);
      },
      {"RandomCrop", "10x10", "[2, 1, 7, 8]", "padding 1"}));
  EXPECT_TRUE(throws_with([&] { crop.apply(zeros({4, 4}), 0); }, {"RandomCrop", "[4, 4]"}));
  Tensor leaf = zeros({2, 1, 12, 12}).set_requires_grad(true);
  EXPECT_TRUE(throws_with([&] { crop.apply(leaf, 0); }, {"RandomCrop", "requires grad"}));
  NoGradGuard no_grad;
  EXPECT_EQ(crop.apply(leaf, 0).shape(), (Shape{2, 1, 10, 10}));
}

TEST(RandomHorizontalFlip, FlipsExactlyTheDrawnExamples) {
  const Shape s{64, 2, 3, 4};
  Tensor x = distinct_images(s);
  const auto xs = x.to_vector<float>();
  RandomHorizontalFlip flip(0.5, 8);
  const auto ys = flip.apply(x, 2).to_vector<float>();
  int flipped = 0;
  for (std::int64_t b = 0; b < 64; ++b) {
    const bool f = flip.flips(2, b);
    flipped += f;
    for (std::int64_t row = 0; row < 6; ++row)
      for (std::int64_t q = 0; q < 4; ++q) {
        const std::size_t base = static_cast<std::size_t>((b * 6 + row) * 4);
        ASSERT_EQ(ys[base + static_cast<std::size_t>(q)],
                  xs[base + static_cast<std::size_t>(f ? 3 - q : q)])
            << "sample " << b;
      }
  }
  // Binomial(64, 0.5): 32 +- 4; both outcomes must occur.
  EXPECT_GT(flipped, 12);
  EXPECT_LT(flipped, 52);

  Tensor always = RandomHorizontalFlip(1.0, 1).apply(x, 0);
  const auto as = always.to_vector<float>();
  for (std::size_t i = 0; i < as.size(); ++i) ASSERT_EQ(as[i], xs[i - i % 4 + (3 - i % 4)]);
  EXPECT_TRUE(bit_equal(RandomHorizontalFlip(0.0, 1).apply(x, 0), x));
  EXPECT_TRUE(throws_with([] { RandomHorizontalFlip(1.5); }, {"RandomHorizontalFlip", "1.5"}));
}

TEST(Transforms, DeterministicGivenSeedAndCallIndex) {
  Tensor x = distinct_images({32, 3, 8, 8});
  RandomCrop crop(8, 2, 4);
  EXPECT_TRUE(bit_equal(crop.apply(x, 7), RandomCrop(8, 2, 4).apply(x, 7)));
  EXPECT_FALSE(bit_equal(crop.apply(x, 7), crop.apply(x, 8)));
  EXPECT_FALSE(bit_equal(crop.apply(x, 7), RandomCrop(8, 2, 5).apply(x, 7)));
  // operator() counts calls: 0, 1, ...
  RandomCrop counted(8, 2, 4);
  EXPECT_TRUE(bit_equal(counted(x), crop.apply(x, 0)));
  EXPECT_TRUE(bit_equal(counted(x), crop.apply(x, 1)));
  EXPECT_EQ(counted.calls(), 2u);
  // A crop and a flip with the same seed draw unrelated bits.
  RandomHorizontalFlip flip(0.5, 4);
  int same = 0;
  for (std::int64_t b = 0; b < 200; ++b)
    same += flip.flips(0, b) == (crop.offset(0, b, 8, 8)[0] < 2);
  EXPECT_LT(same, 160);
}

TEST(Transforms, ComposeAppliesInOrderWithTheSameCallIndex) {
  Tensor x = distinct_images({8, 3, 6, 6});
  auto crop = std::make_shared<RandomCrop>(6, 1, 2);
  auto flip = std::make_shared<RandomHorizontalFlip>(0.5, 3);
  auto norm =
      std::make_shared<Normalize>(std::vector<double>{1, 2, 3}, std::vector<double>{2, 4, 8});
  Compose all({crop, flip, norm});
  EXPECT_TRUE(bit_equal(all.apply(x, 5), norm->apply(flip->apply(crop->apply(x, 5), 5), 5)));
  EXPECT_TRUE(throws_with([] { Compose({nullptr}); }, {"Compose", "transform 0", "null"}));
}

// Crop and flip are ops whose record holds their key: evicting the output and reading it again
// replays the op and redraws the same windows and flips.
TEST(Transforms, ReplayAfterEvictionGivesTheSameBatch) {
  Tensor x = distinct_images({16, 2, 6, 6});
  Pool& pool = Pool::of(Device::cpu());
  for (const auto& t : std::vector<std::shared_ptr<Transform>>{
           std::make_shared<RandomCrop>(5, 2, 1), std::make_shared<RandomHorizontalFlip>(0.5, 1)}) {
    Tensor y = t->apply(x, 4);
    const auto before = y.to_vector<float>();
    Cell& cell = static_cast<Cell&>(*y.storage());
    pool.evict(cell);
    ASSERT_FALSE(cell.resident());
    EXPECT_EQ(y.to_vector<float>(), before);
  }
}

TEST(DataLoader, TransformGetsEpochAndBatchAsCallIndex) {
  std::vector<float> px(20 * 1 * 2 * 3);
  std::iota(px.begin(), px.end(), 1.0f);
  auto ds = std::make_shared<TensorDataset>(tensor<float>(px, Shape{20, 1, 2, 3}),
                                            tensor<std::int64_t>(iota(20), Shape{20}));
  auto flip = std::make_shared<RandomHorizontalFlip>(0.5, 12);
  DataLoader raw(ds, {.batch_size = 6, .shuffle = true, .seed = 2});
  DataLoader augmented(ds, {.batch_size = 6, .shuffle = true, .seed = 2, .transform = flip});
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    std::int64_t i = 0;
    for (const Batch& b : augmented) {
      const Batch r = raw.batch(epoch, i);
      EXPECT_TRUE(bit_equal(b.targets, r.targets));
      EXPECT_TRUE(
          bit_equal(b.inputs, flip->apply(r.inputs, epoch * 4 + static_cast<std::uint64_t>(i))))
          << "epoch " << epoch << " batch " << i;
      ++i;
    }
    EXPECT_EQ(i, 4);
  }
}

// Sharding: rank r of N at batch B takes examples [r*B, (r+1)*B) of each global batch that one
// process at batch N*B draws, so the ranks' batches together are exactly that process's.
TEST(DataLoader, ShardsCoverTheOneProcessBatchesInRankOrder) {
  auto ds = std::make_shared<TensorDataset>(numbered(23));
  for (bool drop_last : {true, false}) {
    DataLoader whole(ds, {.batch_size = 6, .shuffle = true, .drop_last = drop_last, .seed = 4});
    std::vector<std::vector<std::vector<std::int64_t>>> ranks;
    for (std::int64_t r = 0; r < 3; ++r) {
      DataLoader shard(ds, {.batch_size = 2,
                            .shuffle = true,
                            .drop_last = drop_last,
                            .seed = 4,
                            .world_size = 3,
                            .rank = r});
      EXPECT_EQ(shard.num_batches(), drop_last ? 3 : 4);
      shard.set_epoch(1);
      ranks.push_back(epoch_targets(shard));
    }
    whole.set_epoch(1);
    const auto expected = epoch_targets(whole);
    ASSERT_EQ(expected.size(), ranks[0].size());
    for (std::size_t b = 0; b < expected.size(); ++b) {
      std::vector<std::int64_t> joined;
      for (const auto& rank : ranks) joined.insert(joined.end(), rank[b].begin(), rank[b].end());
      EXPECT_EQ(joined, expected[b]) << "global batch " << b;
    }
    if (!drop_last) {  // the short last global batch of 5: shares 2, 2, 1
      EXPECT_EQ(
          (std::vector<std::size_t>{ranks[0][3].size(), ranks[1][3].size(), ranks[2][3].size()}),
          (std::vector<std::size_t>{2, 2, 1}));
    }
  }
}

TEST(DataLoader, AShortLastBatchWithFewerExamplesThanRanksIsDropped) {
  auto ds = std::make_shared<TensorDataset>(numbered(9));
  // Global batches of 8: the ninth example alone cannot give each of 2 ranks one.
  DataLoader shard(ds, {.batch_size = 4, .world_size = 2, .rank = 1});
  EXPECT_EQ(shard.num_batches(), 1);
  EXPECT_EQ(flat(epoch_targets(shard)), (std::vector<std::int64_t>{4, 5, 6, 7}));
}

TEST(DataLoader, ShardingErrorsNameTheBadValue) {
  auto ds = std::make_shared<TensorDataset>(numbered(4));
  EXPECT_TRUE(throws_with([&] { DataLoader(ds, {.batch_size = 1, .world_size = 0}); },
                          {"world_size must be at least 1, got 0"}));
  EXPECT_TRUE(throws_with([&] { DataLoader(ds, {.batch_size = 1, .world_size = 2, .rank = 2}); },
                          {"rank 2 is out of range for world_size 2"}));
}

}  // namespace
}  // namespace remat::nn
