// Fashion-MNIST from its IDX files (gzipped, as Debian's dataset-fashion-mnist installs them, or
// raw): images as float32 [N, 1, 28, 28] in [0, 1], labels as int64 [N] in 0..9.
// Usage: auto train = nn::load_fashion_mnist(nn::kFashionMnistDir, nn::Split::Train);
//        nn::DataLoader loader(train, {.batch_size = 128, .shuffle = true, .seed = 1});
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nn/data.h"

namespace remat::nn {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

enum class Split { Train, Test };
// "train" or "test"; anything else is an error.
Split parse_split(std::string_view name);

// Reads <data_dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte, each as .gz when present,
// else uncompressed.  `limit` keeps the first examples only (every file is still read and
// validated in full).  Any problem (missing directory or file, bad magic number, wrong
// dimensions, a file shorter or longer than its header says, image and label counts that
// disagree, a label outside 0..9) is an Error naming the file and the problem.
TensorDataset load_fashion_mnist(const std::string& data_dir, Split split,
                                 std::optional<std::int64_t> limit = std::nullopt);
TensorDataset load_fashion_mnist(const std::string& data_dir, std::string_view split,
                                 std::optional<std::int64_t> limit = std::nullopt);

// The two files on their own (gzipped or raw), validated the same way.
// An IDX3 image file of 28x28 unsigned bytes -> float32 [N, 1, 28, 28], pixel / 255.
Tensor read_idx_images(const std::string& path, std::optional<std::int64_t> limit = std::nullopt);
// An IDX1 label file of unsigned bytes in 0..9 -> int64 [N].
Tensor read_idx_labels(const std::string& path, std::optional<std::int64_t> limit = std::nullopt);

}  // namespace remat::nn
