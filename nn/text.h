// A character-level text corpus: Debian's fortunes files as one byte stream split into train and
// validation, random windows of it for training and consecutive windows for evaluation. The
// vocabulary is the byte itself (token = unsigned char), so any text works unchanged.
// Usage: auto corpus = nn::load_fortunes();
//        nn::SequenceLoader loader(corpus.train, {.batch_size = 32, .length = 128, .seed = 1});
//        nn::SequenceBatch b = loader.next();  // b.inputs, b.targets: int64 [32, 128]
//        for (const auto& v : nn::contiguous_batches(corpus.valid, 32, 128)) { ... }
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace remat::nn {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
inline constexpr std::int64_t kByteVocabulary = 256;

struct TextCorpus {
  std::vector<std::uint8_t> train, valid;
  std::vector<std::string> files;  // the names read, in the order concatenated
};

// Every regular file directly in `dir`, sorted by name (byte order) and concatenated. Symlinks
// are skipped (Debian ships X.u8 -> X, which would read X twice), as are the strfile indexes
// *.dat and subdirectories. The split is split_text's. A missing directory, no files, a bad
// fraction, a corpus too short or a file that cannot be read is an Error.
TextCorpus load_fortunes(const std::string& dir = kFortunesDir, double valid_fraction = 0.05);

// The last floor(size * valid_fraction) bytes (at least 1) are `valid`, the rest `train`; `files`
// is left empty. valid_fraction must be in (0, 1) and train must keep at least one byte.
TextCorpus split_text(std::vector<std::uint8_t> bytes, double valid_fraction);

// Both int64 [batch, length]; targets[b][t] = text[offset_b + t + 1], the next byte of inputs.
struct SequenceBatch {
  Tensor inputs, targets;
};

struct SequenceLoaderOptions {
  std::int64_t batch_size = 32;
  std::int64_t length = 128;
  std::uint64_t seed = 0;
};

// Random windows of a text for training, with replacement. The stream of batches depends only on
// the text, the options and the number of batches drawn so far: a std::mt19937_64 seeded with
// `seed` (fully specified by the standard) turned into offsets by rejection sampling here rather
// than std::uniform_int_distribution (whose algorithm varies by standard library), so the same
// seed gives the same batches everywhere. skip(n) resumes a run after n batches without building
// them. The text is shared, so copies of a loader are cheap and share no random state.
class SequenceLoader {
 public:
  // The text needs at least length + 1 bytes; batch_size and length must be positive.
  SequenceLoader(std::vector<std::uint8_t> text, SequenceLoaderOptions options = {});

  // batch_size offsets, each uniform in [0, size - length - 1].
  SequenceBatch next();
  // Advances the stream by n >= 0 batches (draws the same offsets next() would, builds nothing).
  void skip(std::int64_t n);
  std::int64_t batches_drawn() const { return batches_drawn_; }

  const SequenceLoaderOptions& options() const { return options_; }
  std::int64_t text_size() const { return static_cast<std::int64_t>(text_->size()); }

 private:
  std::uint64_t draw_offset();

  std::shared_ptr<const std::vector<std::uint8_t>> text_;
  SequenceLoaderOptions options_;
  std::mt19937_64 engine_;
  std::int64_t batches_drawn_ = 0;
};

// The whole of `text` (the validation split) as consecutive windows of length + 1 bytes, window i
// starting at i * length so no byte is a target twice; a tail too short for a window (under
// length bytes) is dropped. Grouped batch_size windows at a time in order; the last batch may be
// smaller. max_batches, when given (>= 1), keeps the first batches only. For evaluating bits per
// character over a split. batch_size and length must be positive and the text at least length + 1
// bytes.
std::vector<SequenceBatch> contiguous_batches(
    const std::vector<std::uint8_t>& text, std::int64_t batch_size, std::int64_t length,
    std::optional<std::int64_t> max_batches = std::nullopt);

}  // namespace remat::nn
