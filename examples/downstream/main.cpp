// A downstream program: an MLP trained a few steps under a memory budget, a model saved and
// loaded, the options structs written with designated initializers as users write them.  Prints
// "downstream: ok" and the losses; exits 1 on any error.
#include <cstdio>
#include <filesystem>

#include "models/resnet.h"
#include "nn/nn.h"
#include "remat.h"

using namespace remat;

int main() {
  try {
    manual_seed(1);
    auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(16, 32),
                                                std::make_shared<nn::ReLU>(),
                                                std::make_shared<nn::Linear>(32, 4));
    nn::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
    Pool::of(Device::cpu()).set_budget(std::size_t{8} << 20);
    Tensor x = randn({64, 16}, {.dtype = DType::Float32, .seed = 2});
    Tensor y = randint(0, 4, {64}, {.seed = 3});
    double first = 0, last = 0;
    for (int step = 0; step < 20; ++step) {
      Tensor loss = cross_entropy(net->forward(x), y, {.label_smoothing = 0.0});
      opt.zero_grad();
      backward(loss);
      opt.step();
      (step == 0 ? first : last) = loss.item<double>();
    }
    const auto path = (std::filesystem::temp_directory_path() / "remat_downstream.rmt").string();
    nn::save(*net, path);
    nn::load(*net, path);
    std::filesystem::remove(path);
    auto resnet = models::resnet("resnet8", {.in_channels = 1, .num_classes = 10});
    Tensor logits = resnet->forward(randn({2, 1, 28, 28}, {.seed = 4}));
    std::printf("downstream: ok, loss %.4f -> %.4f, resnet8 logits %s\n", first, last,
                fmt::format("{}", logits.shape()).c_str());
    return last < first ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "downstream: %s\n", e.what());
    return 1;
  }
}
