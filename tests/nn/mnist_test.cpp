// The Fashion-MNIST IDX reader (nn/mnist.h) on small synthetic files written here, gzipped and
// raw: values and shapes, the limit, and one clear error naming the file for each kind of bad
// file (truncated, bad magic, wrong dimensions, count mismatch, bad label, trailing data, corrupt
// gzip, missing directory or file).  When Debian's dataset-fashion-mnist is installed, the real
// test split is checked against figures computed independently with Python's gzip module.
#include "nn/mnist.h"

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "support/test_util.h"

namespace remat::nn {
namespace {

using testing::throws_with;

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

Bytes header(std::uint32_t magic, std::vector<std::uint32_t> dims) {
  Bytes out;
  auto put = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
  };
  put(magic);
  for (auto d : dims) put(d);
  return out;
}

std::uint8_t pixel(std::size_t image, std::size_t k) {
  return static_cast<std::uint8_t>((image * 37 + k * 11) % 256);
}

Bytes images_file(std::uint32_t n, std::uint32_t rows = 28, std::uint32_t cols = 28) {
  Bytes out = header(2051, {n, rows, cols});
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < std::size_t{rows} * cols; ++k) out.push_back(pixel(i, k));
  return out;
}

Bytes labels_file(std::uint32_t n) {
  Bytes out = header(2049, {n});
  for (std::uint32_t i = 0; i < n; ++i) out.push_back(static_cast<std::uint8_t>(i % 10));
  return out;
}

void write(const fs::path& path, const Bytes& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    if (!bytes.empty()) {
      ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
                static_cast<int>(bytes.size()));
    }
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(f.good()) << path;
  }
}

Bytes read_all(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

class Mnist : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("remat_mnist_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a split's two files; returns {images path, labels path}.
  std::pair<std::string, std::string> write_split(const std::string& prefix, const Bytes& images,
                                                  const Bytes& labels, bool gz) {
    const std::string ext = gz ? ".gz" : "";
    const fs::path ip = dir_ / (prefix + "-images-idx3-ubyte" + ext);
    const fs::path lp = dir_ / (prefix + "-labels-idx1-ubyte" + ext);
    write(ip, images, gz);
    write(lp, labels, gz);
    return {ip.string(), lp.string()};
  }

  fs::path dir_;
};

void expect_synthetic(const TensorDataset& ds, std::int64_t n) {
  ASSERT_EQ(ds.inputs().shape(), (Shape{n, 1, 28, 28}));
  ASSERT_EQ(ds.inputs().dtype(), DType::Float32);
  ASSERT_EQ(ds.targets().shape(), (Shape{n}));
  ASSERT_EQ(ds.targets().dtype(), DType::Int64);
  const auto px = ds.inputs().to_vector<float>();
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i)
    for (std::size_t k = 0; k < 784; ++k)
      ASSERT_EQ(px[i * 784 + k], static_cast<float>(pixel(i, k)) / 255.0f) << i << "," << k;
  const auto lb = ds.targets().to_vector<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(lb[static_cast<std::size_t>(i)], i % 10);
}

TEST_F(Mnist, ReadsGzippedFiles) {
  write_split("train", images_file(12), labels_file(12), true);
  const TensorDataset ds = load_fashion_mnist(dir_.string(), Split::Train);
  expect_synthetic(ds, 12);
  const auto px = ds.inputs().to_vector<float>();
  EXPECT_EQ(*std::min_element(px.begin(), px.end()), 0.0f);
  EXPECT_EQ(*std::max_element(px.begin(), px.end()), 1.0f);
}

TEST_F(Mnist, ReadsRawFilesAndHonoursTheLimit) {
  write_split("t10k", images_file(12), labels_file(12), false);
  expect_synthetic(load_fashion_mnist(dir_.string(), "test"), 12);
  expect_synthetic(load_fashion_mnist(dir_.string(), "test", 5), 5);
  expect_synthetic(load_fashion_mnist(dir_.string(), Split::Test, 100), 12);
  expect_synthetic(load_fashion_mnist(dir_.string(), Split::Test, 0), 0);
  const auto [ip, lp] = std::pair{(dir_ / "t10k-images-idx3-ubyte").string(),
                                  (dir_ / "t10k-labels-idx1-ubyte").string()};
  EXPECT_EQ(read_idx_images(ip, 3).shape(), (Shape{3, 1, 28, 28}));
  EXPECT_EQ(read_idx_labels(lp).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1}));
}

TEST_F(Mnist, ErrorsNameTheFileAndTheProblem) {
  struct Case {
    const char* what;
    Bytes images, labels;
    bool gz;
    bool images_named;  // else the labels file
    std::vector<std::string> fragments;
  };
  Bytes short_images = images_file(12);
  short_images.resize(short_images.size() - 100);
  Bytes short_labels = labels_file(12);
  short_labels.pop_back();
  Bytes long_images = images_file(12);
  long_images.insert(long_images.end(), 5, 0);
  Bytes long_labels = labels_file(12);
  long_labels.insert(long_labels.end(), 3, 7);
  Bytes bad_label = labels_file(12);
  bad_label[8 + 3] = 10;
  Bytes four_dims = header(0x0804, {12, 1, 28, 28});
  Bytes floats = header(0x0d03, {12, 28, 28});
  Bytes not_idx = header(0x12345678, {12, 28, 28});

  const std::vector<Case> cases = {
      {"truncated raw images",
       short_images,
       labels_file(12),
       false,
       true,
       {"truncated", "12 images", "9408 bytes", "9308"}},
      {"truncated gz labels",
       images_file(12),
       short_labels,
       true,
       false,
       {"truncated", "12 labels", "holds only 11"}},
      {"header only",
       Bytes{0, 0, 8, 3, 0, 0},
       labels_file(12),
       false,
       true,
       {"truncated", "header"}},
      {"empty file",
       Bytes{},
       labels_file(12),
       true,
       true,
       {"truncated", "header", "after 0 bytes"}},
      {"bad magic", not_idx, labels_file(12), false, true, {"bad magic number 0x12345678", "2051"}},
      {"labels where images belong",
       labels_file(12),
       labels_file(12),
       false,
       true,
       {"IDX label file", "expected an image file"}},
      {"four dims", four_dims, labels_file(12), true, true, {"4-dimensional", "expected 3"}},
      {"float elements", floats, labels_file(12), false, true, {"element type 0x0d"}},
      {"32x28 images",
       images_file(12, 32, 28),
       labels_file(12),
       false,
       true,
       {"images are 32x28", "expected 28x28"}},
      {"count mismatch",
       images_file(12),
       labels_file(11),
       true,
       true,
       {"holds 12 images", "holds 11 labels", "labels-idx1-ubyte"}},
      {"bad label", images_file(12), bad_label, false, false, {"label 10 at index 3", "0..9"}},
      {"trailing raw",
       long_images,
       labels_file(12),
       false,
       true,
       {"5 bytes of trailing data", "9408 bytes"}},
      {"trailing gz", images_file(12), long_labels, true, false, {"3 bytes of trailing data"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const auto [ip, lp] = write_split("train", c.images, c.labels, c.gz);
    auto fragments = c.fragments;
    fragments.push_back(c.images_named ? ip : lp);
    EXPECT_TRUE(throws_with([&] { load_fashion_mnist(dir_.string(), Split::Train); }, fragments));
    // The single-file readers report the same problem (count mismatch needs both files).
    if (std::string(c.what) != "count mismatch") {
      if (c.images_named)
        EXPECT_TRUE(throws_with([&, ip = ip] { read_idx_images(ip); }, fragments));
      else
        EXPECT_TRUE(throws_with([&, lp = lp] { read_idx_labels(lp); }, fragments));
    }
  }
}

TEST_F(Mnist, DamagedGzipStreams) {
  const auto [ip, lp] = write_split("train", images_file(12), labels_file(12), true);
  const Bytes good = read_all(ip);
  // Cut inside the deflate stream.
  write(ip, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)),
        false);
  EXPECT_TRUE(throws_with([&] { load_fashion_mnist(dir_.string(), Split::Train); },
                          {ip, "truncated", "gzip stream ends"}));
  // Damaged compressed bytes: zlib's checks (or ours, on the length) fail, naming the file.
  Bytes bad = good;
  for (std::size_t i = 20; i < 40 && i < bad.size(); ++i) bad[i] ^= 0x5a;
  write(ip, bad, false);
  EXPECT_TRUE(throws_with([&] { load_fashion_mnist(dir_.string(), Split::Train); }, {ip}));
}

TEST_F(Mnist, MissingDirectoryOrFile) {
  const std::string missing = (dir_ / "nowhere").string();
  EXPECT_TRUE(throws_with([&] { load_fashion_mnist(missing, Split::Train); },
                          {missing, "does not exist", "dataset-fashion-mnist", "--data-dir"}));
  write(dir_ / "t10k-images-idx3-ubyte.gz", images_file(2), true);
  EXPECT_TRUE(throws_with(
      [&] { load_fashion_mnist(dir_.string(), Split::Test); },
      {(dir_ / "t10k-labels-idx1-ubyte.gz").string(), (dir_ / "t10k-labels-idx1-ubyte").string(),
       "dataset-fashion-mnist", "--data-dir"}));
  EXPECT_TRUE(
      throws_with([&] { read_idx_images(dir_.string()); }, {dir_.string(), "no such file"}));
  EXPECT_TRUE(throws_with([&] { load_fashion_mnist(dir_.string(), "validation"); },
                          {"unknown split", "validation"}));
  write_split("t10k", images_file(2), labels_file(2), false);
  EXPECT_TRUE(
      throws_with([&] { load_fashion_mnist(dir_.string(), Split::Test, -3); }, {"limit", "-3"}));
}

// Reference figures from Python: gzip.open(...).read() of the Debian files; the pixel sum is
// the sum of all bytes after the 16-byte header.
TEST(FashionMnist, RealTestSplit) {
  if (!fs::exists(kFashionMnistDir))
    GTEST_SKIP() << kFashionMnistDir
                 << " is absent: install the Debian package dataset-fashion-mnist to run this test";
  const TensorDataset ds = load_fashion_mnist(kFashionMnistDir, Split::Test);
  ASSERT_EQ(ds.size(), 10000);
  ASSERT_EQ(ds.inputs().shape(), (Shape{10000, 1, 28, 28}));
  const auto labels = ds.targets().to_vector<std::int64_t>();
  std::vector<int> counts(10, 0);
  for (const auto l : labels) {
    ASSERT_TRUE(l >= 0 && l <= 9) << l;
    ++counts[static_cast<std::size_t>(l)];
  }
  EXPECT_EQ(counts, std::vector<int>(10, 1000));
  EXPECT_EQ(std::vector<std::int64_t>(labels.begin(), labels.begin() + 10),
            (std::vector<std::int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  const float* px = ds.inputs().data_ptr<float>();
  float lo = 1, hi = 0;
  std::int64_t byte_sum = 0;
  for (std::int64_t i = 0; i < ds.inputs().numel(); ++i) {
    lo = std::min(lo, px[i]);
    hi = std::max(hi, px[i]);
    byte_sum += std::lround(px[i] * 255.0f);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  EXPECT_EQ(byte_sum, 573469082);

  const TensorDataset train = load_fashion_mnist(kFashionMnistDir, Split::Train, 1000);
  EXPECT_EQ(train.size(), 1000);
  const auto tl = train.targets().to_vector<std::int64_t>();
  EXPECT_EQ(std::vector<std::int64_t>(tl.begin(), tl.begin() + 10),
            (std::vector<std::int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
}

}  // namespace
}  // namespace remat::nn
