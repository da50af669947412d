// The character-level corpus (nn/text.h) on small synthetic texts and a directory written here
// (with the .dat indexes, symlinks and subdirectories load_fortunes must skip): the split, file
// order and contents, the random loader's windows and reproducibility, the consecutive evaluation
// windows, and one clear error per bad input. When Debian's fortunes is installed, the real
// corpus is checked against the files read back independently here.
#include "nn/text.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "support/test_util.h"

namespace remat::nn {
namespace {

using testing::throws_with;
using testing::unique_temp_path;

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;
using Rows = std::vector<std::vector<std::int64_t>>;

Bytes iota_bytes(std::size_t n) {
  Bytes out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(i);
  return out;
}

// Random bytes: long windows of it occur once, so a window identifies its offset.
Bytes random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  Bytes out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(gen() & 0xff);
  return out;
}

Bytes bytes_of(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  ASSERT_TRUE(f.good()) << path;
}

Bytes read_all(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

Rows rows(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::Int64);
  EXPECT_EQ(t.dim(), 2);
  const auto v = t.to_vector<std::int64_t>();
  const auto n = static_cast<std::size_t>(t.size(0)), len = static_cast<std::size_t>(t.size(1));
  Rows out(n);
  for (std::size_t r = 0; r < n; ++r)
    out[r].assign(v.begin() + static_cast<std::ptrdiff_t>(r * len),
                  v.begin() + static_cast<std::ptrdiff_t>((r + 1) * len));
  return out;
}

std::vector<std::int64_t> slice(const Bytes& text, std::size_t offset, std::size_t len) {
  return std::vector<std::int64_t>(text.begin() + static_cast<std::ptrdiff_t>(offset),
                                   text.begin() + static_cast<std::ptrdiff_t>(offset + len));
}

// The offset of `row` in `text`, or -1 when it is no contiguous slice of it.
std::int64_t find_row(const Bytes& text, const std::vector<std::int64_t>& row) {
  const auto at = std::search(text.begin(), text.end(), row.begin(), row.end(),
                              [](std::uint8_t a, std::int64_t b) { return a == b; });
  return at == text.end() ? -1 : at - text.begin();
}

bool same_batch(const SequenceBatch& a, const SequenceBatch& b) {
  return rows(a.inputs) == rows(b.inputs) && rows(a.targets) == rows(b.targets);
}

TEST(SplitText, SizesAndContents) {
  const Bytes text = iota_bytes(100);
  TextCorpus c = split_text(text, 0.05);
  EXPECT_EQ(c.train, Bytes(text.begin(), text.begin() + 95));
  EXPECT_EQ(c.valid, Bytes(text.begin() + 95, text.end()));
  EXPECT_TRUE(c.files.empty());
  // Rounded down: 100 * 0.257 = 25.7 -> 25.
  c = split_text(text, 0.257);
  EXPECT_EQ(c.valid.size(), 25u);
  EXPECT_EQ(c.train.size(), 75u);
  EXPECT_EQ(c.valid.front(), 75);
  // At least one byte, however small the fraction.
  c = split_text(text, 0.001);
  EXPECT_EQ(c.valid, Bytes{99});
  EXPECT_EQ(c.train.size(), 99u);
  c = split_text(Bytes{'a', 'b'}, 0.5);
  EXPECT_EQ(c.train, Bytes{'a'});
  EXPECT_EQ(c.valid, Bytes{'b'});
  // A fraction near 1 still leaves train a byte.
  c = split_text(iota_bytes(10), 0.99);
  EXPECT_EQ(c.train.size(), 1u);
  EXPECT_EQ(c.valid.size(), 9u);
}

TEST(SplitText, Errors) {
  for (double f : {0.0, 1.0, -0.1, 1.5, std::nan("")}) {
    SCOPED_TRACE(f);
    EXPECT_TRUE(throws_with([&] { split_text(iota_bytes(100), f); }, {"valid_fraction", "(0, 1)"}));
  }
  EXPECT_TRUE(throws_with([] { split_text(Bytes{'x'}, 0.5); }, {"1 bytes", "too short"}));
  EXPECT_TRUE(throws_with([] { split_text(Bytes{}, 0.5); }, {"0 bytes", "too short"}));
}

class Fortunes : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = unique_temp_path("remat_text", "");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(Fortunes, ReadsRegularFilesInByteOrder) {
  // Created out of order; byte order puts upper case first and UTF-8 after ASCII.
  write(dir_ / "zeta", "Zz\n%\n");
  write(dir_ / "\xc3\xa9t\xc3\xa9", "\xc3\xa9\n");
  write(dir_ / "alpha", "one\n%\ntwo\n");
  write(dir_ / "empty", "");
  write(dir_ / "Beta", "B\n");
  // Skipped: an index, a symlink (Debian's X.u8 -> X), a subdirectory and its file.
  write(dir_ / "alpha.dat", "INDEX");
  fs::create_symlink("alpha", dir_ / "alpha.u8");
  fs::create_symlink("zeta", dir_ / "aaa_link");
  fs::create_directories(dir_ / "sub");
  write(dir_ / "sub" / "inner", "nested");

  const std::string all = "B\none\n%\ntwo\nZz\n%\n\xc3\xa9\n";  // 20 bytes
  const TextCorpus c = load_fortunes(dir_.string(), 0.25);
  EXPECT_EQ(c.files,
            (std::vector<std::string>{"Beta", "alpha", "empty", "zeta", "\xc3\xa9t\xc3\xa9"}));
  ASSERT_EQ(all.size(), 20u);
  EXPECT_EQ(c.valid, bytes_of(all.substr(15)));
  EXPECT_EQ(c.train, bytes_of(all.substr(0, 15)));

  const TextCorpus d = load_fortunes(dir_.string());  // 5% of 20 bytes is 1
  EXPECT_EQ(d.valid, bytes_of(all.substr(19)));
  EXPECT_EQ(d.train, bytes_of(all.substr(0, 19)));
}

TEST_F(Fortunes, Errors) {
  const std::string missing = (dir_ / "nowhere").string();
  EXPECT_TRUE(throws_with(
      [&] { load_fortunes(missing); },
      {missing, "does not exist", "install the Debian package fortunes", "scripts/setup.sh"}));
  write(dir_ / "plain", "x");
  EXPECT_TRUE(throws_with([&] { load_fortunes((dir_ / "plain").string()); },
                          {(dir_ / "plain").string(), "not a directory"}));
  fs::remove(dir_ / "plain");

  // Nothing but what is skipped.
  write(dir_ / "a.dat", "INDEX");
  fs::create_symlink("a.dat", dir_ / "a");
  fs::create_directories(dir_ / "sub");
  EXPECT_TRUE(throws_with([&] { load_fortunes(dir_.string()); }, {dir_.string(), "no text files"}));

  write(dir_ / "one", "x");
  EXPECT_TRUE(throws_with([&] { load_fortunes(dir_.string()); }, {"1 bytes", "too few"}));
  write(dir_ / "two", "yz");
  EXPECT_NO_THROW(load_fortunes(dir_.string()));
  for (double f : {0.0, 1.0, -1.0, 2.0})
    EXPECT_TRUE(throws_with([&] { load_fortunes(dir_.string(), f); }, {"valid_fraction"}));
}

TEST(SequenceLoader, RowsAreShiftedSlicesOfTheText) {
  const Bytes text = random_bytes(5000, 7);
  SequenceLoader loader(text, {.batch_size = 16, .length = 40, .seed = 3});
  EXPECT_EQ(loader.batches_drawn(), 0);
  EXPECT_EQ(loader.text_size(), 5000);
  bool high_byte = false;
  for (int k = 0; k < 5; ++k) {
    const SequenceBatch b = loader.next();
    ASSERT_EQ(b.inputs.shape(), (Shape{16, 40}));
    ASSERT_EQ(b.targets.shape(), (Shape{16, 40}));
    const Rows in = rows(b.inputs), out = rows(b.targets);
    for (std::size_t r = 0; r < in.size(); ++r) {
      const std::int64_t at = find_row(text, in[r]);
      ASSERT_GE(at, 0) << "row " << r << " is not a slice of the text";
      ASSERT_LE(at, 5000 - 40 - 1);
      EXPECT_EQ(in[r], slice(text, static_cast<std::size_t>(at), 40));
      EXPECT_EQ(out[r], slice(text, static_cast<std::size_t>(at) + 1, 40));
      // Shifted by one: each target is the next input.
      EXPECT_TRUE(std::equal(in[r].begin() + 1, in[r].end(), out[r].begin()));
      for (auto v : in[r]) {
        ASSERT_TRUE(v >= 0 && v < kByteVocabulary) << v;
        high_byte |= v >= 128;
      }
    }
  }
  EXPECT_TRUE(high_byte);  // bytes are unsigned, never negative
  EXPECT_EQ(loader.batches_drawn(), 5);
}

TEST(SequenceLoader, OffsetsCoverTheWholeRange) {
  // length + 2 bytes: offsets 0 and 1 both occur, nothing past them.
  const Bytes text = iota_bytes(10);
  SequenceLoader loader(text, {.batch_size = 64, .length = 8, .seed = 1});
  std::set<std::int64_t> firsts;
  for (const auto& row : rows(loader.next().inputs)) firsts.insert(row[0]);
  EXPECT_EQ(firsts, (std::set<std::int64_t>{0, 1}));
  // Exactly length + 1 bytes: the one window there is.
  SequenceLoader one(iota_bytes(9), {.batch_size = 3, .length = 8});
  const SequenceBatch b = one.next();
  for (const auto& row : rows(b.inputs)) EXPECT_EQ(row, slice(iota_bytes(9), 0, 8));
  for (const auto& row : rows(b.targets)) EXPECT_EQ(row, slice(iota_bytes(9), 1, 8));
}

TEST(SequenceLoader, ReproducibleFromTheSeedAndResumable) {
  const Bytes text = random_bytes(3000, 11);
  const SequenceLoaderOptions opts{.batch_size = 8, .length = 32, .seed = 42};
  SequenceLoader a(text, opts), b(text, opts);
  std::vector<SequenceBatch> stream;
  for (int k = 0; k < 6; ++k) {
    stream.push_back(a.next());
    EXPECT_TRUE(same_batch(stream.back(), b.next())) << "batch " << k;
  }
  EXPECT_FALSE(same_batch(stream[0], stream[1]));

  SequenceLoaderOptions other = opts;
  other.seed = 43;
  SequenceLoader c(text, other);
  EXPECT_FALSE(same_batch(stream[0], c.next()));

  for (std::int64_t n : {0, 1, 3, 5}) {
    SCOPED_TRACE(n);
    SequenceLoader fresh(text, opts);
    fresh.skip(n);
    EXPECT_EQ(fresh.batches_drawn(), n);
    EXPECT_TRUE(same_batch(fresh.next(), stream[static_cast<std::size_t>(n)]));
    EXPECT_EQ(fresh.batches_drawn(), n + 1);
  }
  // A copy carries the stream's position on, independently of the original.
  SequenceLoader d(text, opts);
  d.skip(2);
  SequenceLoader e = d;
  EXPECT_TRUE(same_batch(d.next(), stream[2]));
  EXPECT_TRUE(same_batch(e.next(), stream[2]));
}

TEST(ContiguousBatches, CoverTheWindowsInOrder) {
  // 23 bytes, length 5: windows at 0, 5, 10, 15 (the last ends at byte 20); 3 per batch.
  const Bytes text = random_bytes(23, 5);
  const auto batches = contiguous_batches(text, 3, 5);
  ASSERT_EQ(batches.size(), 2u);
  ASSERT_EQ(batches[0].inputs.shape(), (Shape{3, 5}));
  ASSERT_EQ(batches[1].inputs.shape(), (Shape{1, 5}));  // the partial last batch
  ASSERT_EQ(batches[1].targets.shape(), (Shape{1, 5}));
  std::size_t window = 0;
  for (const auto& b : batches) {
    const Rows in = rows(b.inputs), out = rows(b.targets);
    for (std::size_t r = 0; r < in.size(); ++r, ++window) {
      EXPECT_EQ(in[r], slice(text, window * 5, 5)) << "window " << window;
      EXPECT_EQ(out[r], slice(text, window * 5 + 1, 5)) << "window " << window;
    }
  }
  EXPECT_EQ(window, 4u);

  // Every byte after the first is a target exactly once when the windows tile the text.
  const Bytes tiled = iota_bytes(21);
  std::vector<std::int64_t> targets;
  for (const auto& b : contiguous_batches(tiled, 2, 5))
    for (const auto& row : rows(b.targets)) targets.insert(targets.end(), row.begin(), row.end());
  EXPECT_EQ(targets, slice(tiled, 1, 20));

  const auto first = contiguous_batches(text, 3, 5, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(same_batch(first[0], batches[0]));
  EXPECT_EQ(contiguous_batches(text, 3, 5, 10).size(), 2u);
  EXPECT_EQ(contiguous_batches(text, 100, 5).size(), 1u);
  const auto single = contiguous_batches(iota_bytes(6), 4, 5);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].inputs.shape(), (Shape{1, 5}));
}

TEST(TextOptions, ErrorsNameTheOption) {
  const Bytes text = iota_bytes(100);
  EXPECT_TRUE(throws_with([&] { SequenceLoader(text, {.batch_size = 0}); },
                          {"SequenceLoader", "batch_size", "positive", "0"}));
  EXPECT_TRUE(throws_with([&] { SequenceLoader(text, {.batch_size = 2, .length = -1}); },
                          {"SequenceLoader", "length", "positive", "-1"}));
  EXPECT_TRUE(throws_with([&] { SequenceLoader(text, {.batch_size = 2, .length = 100}); },
                          {"SequenceLoader", "100 bytes", "length + 1 = 101"}));
  EXPECT_NO_THROW(SequenceLoader(text, {.batch_size = 2, .length = 99}));
  EXPECT_TRUE(throws_with([&] { SequenceLoader(Bytes{}, {}); }, {"0 bytes", "length + 1"}));
  SequenceLoader ok(text, {.batch_size = 2, .length = 10});
  EXPECT_TRUE(throws_with([&] { ok.skip(-1); }, {"skip", "non-negative", "-1"}));

  EXPECT_TRUE(throws_with([&] { contiguous_batches(text, 0, 5); },
                          {"contiguous_batches", "batch_size", "positive"}));
  EXPECT_TRUE(throws_with([&] { contiguous_batches(text, 2, 0); },
                          {"contiguous_batches", "length", "positive"}));
  EXPECT_TRUE(throws_with([&] { contiguous_batches(text, 2, 5, 0); },
                          {"contiguous_batches", "max_batches", "positive"}));
  EXPECT_TRUE(throws_with([&] { contiguous_batches(text, 2, 100); },
                          {"contiguous_batches", "100 bytes", "length + 1"}));
  EXPECT_TRUE(throws_with([&] { contiguous_batches(text, std::int64_t{1} << 40, 1 << 30); },
                          {"batch_size", "overflows"}));
}

// The expected bytes are read here file by file, independently of load_fortunes's listing.
TEST(FortunesCorpus, RealCorpus) {
  if (!fs::exists(kFortunesDir))
    GTEST_SKIP() << kFortunesDir
                 << " is absent: install the Debian package fortunes (scripts/setup.sh) to run "
                    "this test";
  const TextCorpus c = load_fortunes();
  const std::size_t total = c.train.size() + c.valid.size();
  EXPECT_GT(total, 2000000u);
  EXPECT_NEAR(static_cast<double>(c.valid.size()), 0.05 * static_cast<double>(total), 1.0);
  ASSERT_FALSE(c.files.empty());
  EXPECT_TRUE(std::is_sorted(c.files.begin(), c.files.end()));
  Bytes expected;
  for (const auto& name : c.files) {
    const fs::path p = fs::path(kFortunesDir) / name;
    EXPECT_FALSE(fs::is_symlink(p)) << name;
    EXPECT_FALSE(name.ends_with(".dat")) << name;
    const Bytes b = read_all(p);
    expected.insert(expected.end(), b.begin(), b.end());
  }
  // Every regular non-index file is there: none was missed.
  std::size_t regular = 0;
  for (const auto& e : fs::directory_iterator(kFortunesDir))
    if (e.is_regular_file() && !e.is_symlink() && !e.path().string().ends_with(".dat")) ++regular;
  EXPECT_EQ(c.files.size(), regular);
  Bytes joined = c.train;
  joined.insert(joined.end(), c.valid.begin(), c.valid.end());
  EXPECT_EQ(joined.size(), expected.size());
  EXPECT_TRUE(joined == expected);  // not EXPECT_EQ: a failure would print megabytes
}

}  // namespace
}  // namespace remat::nn
