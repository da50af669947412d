#include "nn/mnist.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>
#include <string_view>
#include <vector>

#include "ops/factory.h"

namespace remat::nn {
namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t kImageMagic = 2051;  // 0x00000803: unsigned bytes, 3 dims
constexpr std::uint32_t kLabelMagic = 2049;  // 0x00000801: unsigned bytes, 1 dim
constexpr std::int64_t kSide = 28;
constexpr std::size_t kChunk = std::size_t{1} << 20;

// A gzip or raw file read through zlib (gzread passes non-gzip files through unchanged), with
// every failure an Error naming the file.
class IdxReader {
 public:
  explicit IdxReader(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    REMAT_CHECK(fs::is_regular_file(path_, ec), "{}: no such file (or not a regular file)", path_);
    errno = 0;
    file_ = gzopen(path_.c_str(), "rb");
    REMAT_CHECK(file_ != nullptr, "{}: cannot open: {}", path_,
                errno ? std::strerror(errno) : "out of memory");
    gzbuffer(file_, 1 << 17);
  }
  ~IdxReader() {
    if (file_) gzclose(file_);
  }
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;

  const std::string& path() const { return path_; }

  // Reads up to n bytes (fewer only at the end of the data).
  std::size_t read(void* dst, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      const auto want = static_cast<unsigned>(std::min(n - done, kChunk));
      const int got = gzread(file_, static_cast<char*>(dst) + done, want);
      int err = Z_OK;
      const char* msg = gzerror(file_, &err);
      if (got < 0 || (err != Z_OK && err != Z_BUF_ERROR)) {
        std::string_view what = msg ? msg : "unknown zlib error";
        if (what.starts_with(path_ + ": ")) what.remove_prefix(path_.size() + 2);
        REMAT_THROW("{}: corrupt gzip data ({})", path_, what);
      }
      // zlib flags a stream cut short as soon as it meets the end of the input, but still
      // hands out what it decoded before that: only a short read means the data ran out.
      if (err == Z_BUF_ERROR && static_cast<unsigned>(got) < want)
        REMAT_THROW("{}: truncated: the gzip stream ends unexpectedly after {} bytes of data",
                    path_, offset_ + done + static_cast<std::size_t>(got));
      done += static_cast<std::size_t>(got);
      if (static_cast<unsigned>(got) < want) break;
    }
    offset_ += done;
    return done;
  }

  std::uint32_t read_u32(const char* what) {
    unsigned char b[4];
    const std::size_t got = read(b, 4);
    REMAT_CHECK(got == 4, "{}: truncated: the file ends inside the IDX header ({}) after {} bytes",
                path_, what, offset_);
    return std::uint32_t{b[0]} << 24 | std::uint32_t{b[1]} << 16 | std::uint32_t{b[2]} << 8 |
           std::uint32_t{b[3]};
  }

  // Checks the magic number and returns the dimension sizes that follow it.
  std::vector<std::int64_t> read_header(std::uint32_t expected, const char* kind) {
    const std::uint32_t magic = read_u32("magic number");
    if (magic != expected) {
      const std::uint32_t ndims = expected & 0xff;
      if (magic == kImageMagic || magic == kLabelMagic)
        REMAT_THROW("{}: this is an IDX {} file (magic number {}), expected an {} file (magic {})",
                    path_, magic == kImageMagic ? "image" : "label", magic, kind, expected);
      if ((magic >> 16) != 0)
        REMAT_THROW(
            "{}: not an IDX file: bad magic number 0x{:08x} (expected 0x{:08x} = {} for "
            "an {} file)",
            path_, magic, expected, expected, kind);
      if ((magic >> 8 & 0xff) != 0x08)
        REMAT_THROW(
            "{}: bad magic number 0x{:08x}: element type 0x{:02x}, expected unsigned "
            "bytes (0x08)",
            path_, magic, magic >> 8 & 0xff);
      REMAT_THROW(
          "{}: bad magic number 0x{:08x}: the file holds a {}-dimensional array, "
          "expected {} dimension{} for an {} file",
          path_, magic, magic & 0xff, ndims, ndims == 1 ? "" : "s", kind);
    }
    std::vector<std::int64_t> dims;
    for (std::uint32_t d = 0; d < (expected & 0xff); ++d) dims.push_back(read_u32("dimensions"));
    return dims;
  }

  // Reads `keep` payload bytes, then checks that exactly `claimed` follow the header.
  std::vector<std::uint8_t> read_payload(std::uint64_t claimed, std::uint64_t keep,
                                         const std::string& claim) {
    std::vector<std::uint8_t> data;
    // Grown as bytes arrive, so a header claiming absurd sizes cannot allocate them.
    std::uint64_t have = 0;
    while (have < keep) {
      const std::size_t step =
          static_cast<std::size_t>(std::min<std::uint64_t>(keep - have, kChunk));
      data.resize(static_cast<std::size_t>(have) + step);
      const std::size_t got = read(data.data() + have, step);
      have += got;
      if (got < step) break;
    }
    data.resize(static_cast<std::size_t>(have));
    std::vector<std::uint8_t> scratch(kChunk);
    std::uint64_t seen = have;
    while (seen < claimed && have == keep) {
      const std::size_t step =
          static_cast<std::size_t>(std::min<std::uint64_t>(claimed - seen, kChunk));
      const std::size_t got = read(scratch.data(), step);
      seen += got;
      if (got < step) break;
    }
    REMAT_CHECK(have == keep && seen == claimed,
                "{}: truncated: the header claims {} ({} bytes of data) but the file holds only "
                "{} bytes of data",
                path_, claim, claimed, have < keep ? have : seen);
    std::uint64_t extra = 0;
    for (std::size_t got; (got = read(scratch.data(), kChunk)) > 0;) extra += got;
    REMAT_CHECK(extra == 0,
                "{}: {} bytes of trailing data after the {} bytes the header claims ({}); the file "
                "is corrupt or not an IDX file of this kind",
                path_, extra, claimed, claim);
    return data;
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
  std::uint64_t offset_ = 0;  // uncompressed bytes read so far
};

std::uint64_t kept(std::int64_t count, std::optional<std::int64_t> limit, const std::string& path) {
  REMAT_CHECK(!limit || *limit >= 0, "{}: limit must be non-negative, got {}", path, *limit);
  return static_cast<std::uint64_t>(limit ? std::min(count, *limit) : count);
}

struct Labels {
  Tensor tensor;
  std::int64_t count = 0;  // in the file, before the limit
};

Labels read_labels(const std::string& path, std::optional<std::int64_t> limit) {
  IdxReader in(path);
  const std::int64_t n = in.read_header(kLabelMagic, "label")[0];
  // Every label is checked, the ones past the limit too.
  auto bytes = in.read_payload(static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(n),
                               fmt::format("{} labels", n));
  for (std::size_t i = 0; i < bytes.size(); ++i)
    REMAT_CHECK(bytes[i] <= 9, "{}: label {} at index {} is outside 0..9", path, bytes[i], i);
  const std::uint64_t keep = kept(n, limit, path);
  std::vector<std::int64_t> values(bytes.begin(),
                                   bytes.begin() + static_cast<std::ptrdiff_t>(keep));
  return {tensor<std::int64_t>(values, Shape{static_cast<std::int64_t>(keep)}), n};
}

Tensor read_images(const std::string& path, std::optional<std::int64_t> limit,
                   const std::string* labels_path, std::int64_t label_count) {
  IdxReader in(path);
  const auto dims = in.read_header(kImageMagic, "image");
  const std::int64_t n = dims[0], rows = dims[1], cols = dims[2];
  REMAT_CHECK(rows == kSide && cols == kSide, "{}: images are {}x{}, expected {}x{}", path, rows,
              cols, kSide, kSide);
  if (labels_path)
    REMAT_CHECK(n == label_count, "{} holds {} images but {} holds {} labels", path, n,
                *labels_path, label_count);
  const std::uint64_t keep = kept(n, limit, path);
  const std::uint64_t per_image = static_cast<std::uint64_t>(kSide * kSide);
  const auto pixels = in.read_payload(static_cast<std::uint64_t>(n) * per_image, keep * per_image,
                                      fmt::format("{} images of {}x{}", n, kSide, kSide));
  return detail::constant_filled(
      TensorMeta::contiguous({static_cast<std::int64_t>(keep), 1, kSide, kSide}, DType::Float32,
                             Device::cpu()),
      [&](void* out) {
        auto* dst = static_cast<float*>(out);
        for (std::size_t i = 0; i < pixels.size(); ++i)
          dst[i] = static_cast<float>(pixels[i]) / 255.0f;
      });
}

// Out of memory is reported as an Error naming the file, like every other failure.
template <class F>
auto guarded(const std::string& path, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    REMAT_THROW("{}: out of memory while reading", path);
  }
}

std::string resolve(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  for (const auto& candidate : {dir / (name + ".gz"), dir / name})
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  REMAT_THROW(
      "Fashion-MNIST: neither {} nor {} exists; install the Debian package "
      "dataset-fashion-mnist (files in {}) or pass --data-dir with the directory "
      "holding the IDX files",
      (dir / (name + ".gz")).string(), (dir / name).string(), kFashionMnistDir);
}

}  // namespace

Split parse_split(std::string_view name) {
  if (name == "train") return Split::Train;
  if (name == "test") return Split::Test;
  REMAT_THROW("Fashion-MNIST: unknown split \"{}\" (expected \"train\" or \"test\")", name);
}

Tensor read_idx_images(const std::string& path, std::optional<std::int64_t> limit) {
  return guarded(path, [&] { return read_images(path, limit, nullptr, 0); });
}

Tensor read_idx_labels(const std::string& path, std::optional<std::int64_t> limit) {
  return guarded(path, [&] { return read_labels(path, limit).tensor; });
}

TensorDataset load_fashion_mnist(const std::string& data_dir, Split split,
                                 std::optional<std::int64_t> limit) {
  REMAT_CHECK(!limit || *limit >= 0, "Fashion-MNIST: limit must be non-negative, got {}", *limit);
  std::error_code ec;
  const fs::path dir(data_dir);
  REMAT_CHECK(fs::is_directory(dir, ec),
              "Fashion-MNIST: data directory {} does not exist (or is not a directory); install "
              "the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist, "
              "which puts the files in {}) or pass --data-dir with the directory holding the IDX "
              "files",
              data_dir, kFashionMnistDir);
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images_path = resolve(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = resolve(dir, prefix + "-labels-idx1-ubyte");
  Labels labels = guarded(labels_path, [&] { return read_labels(labels_path, limit); });
  Tensor images = guarded(
      images_path, [&] { return read_images(images_path, limit, &labels_path, labels.count); });
  return TensorDataset(std::move(images), std::move(labels.tensor));
}

TensorDataset load_fashion_mnist(const std::string& data_dir, std::string_view split,
                                 std::optional<std::int64_t> limit) {
  return load_fashion_mnist(data_dir, parse_split(split), limit);
}

}  // namespace remat::nn
