// Fuzzes the IDX reader (gzip or raw images and labels): any input is a value or a remat::Error.
// The first byte picks the reader and the limit; the rest is the file.
#include "nn/mnist.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string path = remat::fuzz::input_file(data + 1, size - 1, ".idx");
  const std::optional<std::int64_t> limit =
      data[0] & 2 ? std::optional<std::int64_t>(data[0] >> 2) : std::nullopt;
  try {
    if (data[0] & 1)
      remat::nn::read_idx_labels(path, limit);
    else
      remat::nn::read_idx_images(path, limit);
  } catch (const remat::Error&) {
  }
  return 0;
}
