// Fuzzes loading model and optimizer state (docs/serialization-format.md): any file is loaded
// or refused with a remat::Error, and a refused load leaves module and optimizer unchanged.
#include "nn/nn.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
struct Target {
  std::shared_ptr<remat::nn::Linear> model = std::make_shared<remat::nn::Linear>(3, 2);
  remat::nn::Adam adam{model->parameters(), {.lr = 0.01}};
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Target target;
  const std::string path = remat::fuzz::input_file(data, size, ".rmt");
  try {
    for (const auto& [name, t] : remat::nn::load_state(path)) (void)t.shape();
  } catch (const remat::Error&) {
  }
  try {
    remat::nn::load(*target.model, path);
  } catch (const remat::Error&) {
  }
  try {
    remat::nn::load(target.adam, path);
  } catch (const remat::Error&) {
  }
  return 0;
}
