#include "nn/text.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>

#include "nn/data.h"

namespace remat::nn {
namespace {

namespace fs = std::filesystem;

void check_shape_options(const char* who, std::int64_t batch_size, std::int64_t length) {
  REMAT_CHECK(batch_size > 0, "{}: batch_size must be positive, got {}", who, batch_size);
  REMAT_CHECK(length > 0, "{}: length must be positive, got {}", who, length);
  // The tensors hold batch_size * length elements; refuse what would overflow the count.
  REMAT_CHECK(batch_size <= std::numeric_limits<std::int64_t>::max() / length,
              "{}: batch_size {} times length {} overflows", who, batch_size, length);
}

void check_text_size(const char* who, std::size_t size, std::int64_t length) {
  REMAT_CHECK(size >= static_cast<std::uint64_t>(length) + 1,
              "{}: the text has {} bytes, fewer than length + 1 = {} (one window and its next "
              "byte)",
              who, size, length + 1);
}

// inputs[b][t] = text[offsets[b] + t], targets[b][t] = text[offsets[b] + t + 1]; the windows
// are copied straight into the tensors' storage.
SequenceBatch make_batch(const std::vector<std::uint8_t>& text,
                         const std::vector<std::uint64_t>& offsets, std::int64_t length) {
  const auto rows = static_cast<std::int64_t>(offsets.size());
  const auto meta = TensorMeta::contiguous({rows, length}, DType::Int64, Device::cpu());
  auto fill = [&](std::size_t shift) {
    return [&, shift](void* out) {
      auto* dst = static_cast<std::int64_t*>(out);
      const auto len = static_cast<std::size_t>(length);
      for (std::size_t b = 0; b < offsets.size(); ++b) {
        const std::uint8_t* src = text.data() + offsets[b] + shift;
        for (std::size_t t = 0; t < len; ++t) dst[b * len + t] = src[t];
      }
    };
  };
  return {detail::constant_filled(meta, fill(0)), detail::constant_filled(meta, fill(1))};
}

std::vector<std::uint8_t> read_file(const fs::path& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  REMAT_CHECK(in.is_open(), "load_fortunes: cannot open {}: {}", path.string(),
              errno ? std::strerror(errno) : "unknown error");
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  REMAT_CHECK(!in.bad(), "load_fortunes: error reading {}", path.string());
  return bytes;
}

}  // namespace

TextCorpus split_text(std::vector<std::uint8_t> bytes, double valid_fraction) {
  REMAT_CHECK(valid_fraction > 0 && valid_fraction < 1,
              "split_text: valid_fraction must be in (0, 1), got {}", valid_fraction);
  const std::size_t n = bytes.size();
  auto valid = static_cast<std::size_t>(std::floor(static_cast<double>(n) * valid_fraction));
  valid = std::max<std::size_t>(valid, 1);
  REMAT_CHECK(valid < n,
              "split_text: a text of {} bytes is too short to split (valid_fraction {} leaves "
              "{} validation bytes and no training bytes)",
              n, valid_fraction, valid);
  TextCorpus out;
  const auto cut = static_cast<std::ptrdiff_t>(n - valid);
  out.valid.assign(bytes.begin() + cut, bytes.end());
  bytes.resize(n - valid);
  out.train = std::move(bytes);
  return out;
}

TextCorpus load_fortunes(const std::string& dir, double valid_fraction) {
  // Checked before reading megabytes that split_text would then refuse.
  REMAT_CHECK(valid_fraction > 0 && valid_fraction < 1,
              "load_fortunes: valid_fraction must be in (0, 1), got {}", valid_fraction);
  std::error_code ec;
  REMAT_CHECK(fs::is_directory(dir, ec),
              "load_fortunes: directory {} does not exist (or is not a directory); install the "
              "Debian package fortunes (scripts/setup.sh), which puts the files in {}",
              dir, kFortunesDir);
  std::vector<std::string> names;
  fs::directory_iterator it(dir, ec), end;
  REMAT_CHECK(!ec, "load_fortunes: cannot list {}: {}", dir, ec.message());
  for (; it != end; it.increment(ec)) {
    REMAT_CHECK(!ec, "load_fortunes: cannot list {}: {}", dir, ec.message());
    // symlink_status: a link is skipped whatever it points to.
    const fs::file_status st = it->symlink_status(ec);
    if (ec || !fs::is_regular_file(st)) continue;
    std::string name = it->path().filename().string();
    if (std::string_view(name).ends_with(".dat")) continue;
    names.push_back(std::move(name));
  }
  REMAT_CHECK(!ec, "load_fortunes: cannot list {}: {}", dir, ec.message());
  REMAT_CHECK(!names.empty(),
              "load_fortunes: no text files in {} (only symlinks, *.dat indexes or "
              "subdirectories); install the Debian package fortunes (scripts/setup.sh)",
              dir);
  // std::string compares as unsigned bytes, so this is byte order whatever the locale.
  std::sort(names.begin(), names.end());
  std::vector<std::uint8_t> all;
  for (const auto& name : names) {
    const auto bytes = read_file(fs::path(dir) / name);
    all.insert(all.end(), bytes.begin(), bytes.end());
  }
  REMAT_CHECK(all.size() >= 2, "load_fortunes: the files in {} hold {} bytes, too few to split",
              dir, all.size());
  TextCorpus out = split_text(std::move(all), valid_fraction);
  out.files = std::move(names);
  return out;
}

SequenceLoader::SequenceLoader(std::vector<std::uint8_t> text, SequenceLoaderOptions options)
    : options_(options), engine_(options.seed) {
  check_shape_options("SequenceLoader", options.batch_size, options.length);
  check_text_size("SequenceLoader", text.size(), options.length);
  text_ = std::make_shared<const std::vector<std::uint8_t>>(std::move(text));
}

std::uint64_t SequenceLoader::draw_offset() {
  const std::uint64_t n = text_->size() - static_cast<std::uint64_t>(options_.length);
  // Rejects the lowest 2^64 mod n values so the rest divide evenly into n residues.
  const std::uint64_t threshold = (0 - n) % n;
  for (;;) {
    const std::uint64_t x = engine_();
    if (x >= threshold) return x % n;
  }
}

SequenceBatch SequenceLoader::next() {
  std::vector<std::uint64_t> offsets(static_cast<std::size_t>(options_.batch_size));
  for (auto& o : offsets) o = draw_offset();
  ++batches_drawn_;
  return make_batch(*text_, offsets, options_.length);
}

void SequenceLoader::skip(std::int64_t n) {
  REMAT_CHECK(n >= 0, "SequenceLoader::skip: n must be non-negative, got {}", n);
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t i = 0; i < options_.batch_size; ++i) draw_offset();
    ++batches_drawn_;
  }
}

std::vector<SequenceBatch> contiguous_batches(const std::vector<std::uint8_t>& text,
                                              std::int64_t batch_size, std::int64_t length,
                                              std::optional<std::int64_t> max_batches) {
  check_shape_options("contiguous_batches", batch_size, length);
  REMAT_CHECK(!max_batches || *max_batches > 0,
              "contiguous_batches: max_batches must be positive, got {}", *max_batches);
  check_text_size("contiguous_batches", text.size(), length);
  // Window i spans [i * length, i * length + length], so it fits while i * length + length < size.
  const auto len = static_cast<std::uint64_t>(length);
  const std::uint64_t windows = (text.size() - 1) / len;
  const auto per_batch = static_cast<std::uint64_t>(batch_size);
  std::uint64_t batches = (windows + per_batch - 1) / per_batch;
  if (max_batches) batches = std::min(batches, static_cast<std::uint64_t>(*max_batches));
  std::vector<SequenceBatch> out;
  out.reserve(static_cast<std::size_t>(batches));
  std::vector<std::uint64_t> offsets;
  for (std::uint64_t b = 0; b < batches; ++b) {
    offsets.clear();
    for (std::uint64_t w = b * per_batch; w < std::min(windows, (b + 1) * per_batch); ++w)
      offsets.push_back(w * len);
    out.push_back(make_batch(text, offsets, length));
  }
  return out;
}

}  // namespace remat::nn
