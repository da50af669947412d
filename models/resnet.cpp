#include "models/resnet.h"

#include "autograd/checkpoint.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/sequential.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/join.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace remat::models {
namespace {

using nn::BatchNorm2d;
using nn::Conv2d;
using nn::Module;

std::shared_ptr<Conv2d> conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride,
                             std::int64_t padding) {
  auto c = std::make_shared<Conv2d>(nn::Conv2dOptions{.in_channels = in,
                                                      .out_channels = out,
                                                      .kernel_size = k,
                                                      .stride = stride,
                                                      .padding = padding,
                                                      .bias = false});
  // He initialisation for ReLU networks (fan_out), as torchvision's ResNets.
  nn::init::kaiming_normal_(c->param("weight"), {.mode = nn::init::FanMode::FanOut,
                                                 .nonlinearity = nn::init::Nonlinearity::ReLU});
  return c;
}

// A residual stage, checkpointed when asked.  Blocks mark their convolutions as SAVE regions and
// their element-wise work as RECOMPUTE regions; outside a checkpoint regions just run.
Tensor run_stage(const std::shared_ptr<nn::Sequential>& stage, const Tensor& x, bool checkpointed,
                 const std::string& name) {
  if (!checkpointed) return stage->forward(x);
  return checkpoint([stage](const Tensor& t) { return stage->forward(t); }, x, {.name = name});
}

// CIFAR basic block: two 3x3 convolutions; the shortcut subsamples and pads channels with zeros.
class CifarBlock final : public Module {
 public:
  CifarBlock(std::int64_t in, std::int64_t out, std::int64_t stride)
      : Module("CifarBlock"), in_(in), out_(out), stride_(stride) {
    conv1_ = register_module("conv1", conv(in, out, 3, stride, 1));
    bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(out));
    conv2_ = register_module("conv2", conv(out, out, 3, 1, 1));
    bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(out));
  }
  Tensor forward(const Tensor& x) override {
    Tensor c1 = region([this](const Tensor& t) { return conv1_->forward(t); }, "conv")(x);
    Tensor h =
        region([this](const Tensor& t) { return bn1_->forward(t, {.residual = {}, .relu = true}); },
               "bn_relu", true)(c1);
    Tensor c2 = region([this](const Tensor& t) { return conv2_->forward(t); }, "conv")(h);
    // relu(bn2(c2) + shortcut) is one op: one pass forward, one backward.
    auto tail = [this](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{bn2_->forward(in[0], {.residual = shortcut(in[1]), .relu = true})};
    };
    return region(tail, "bn_add_relu", true)({c2, x})[0];
  }

 private:
  Tensor shortcut(const Tensor& x) const {
    if (stride_ == 1 && in_ == out_) return x;
    Tensor s = slice(slice(x, 2, 0, x.size(2), stride_), 3, 0, x.size(3), stride_);
    const std::int64_t pad = (out_ - in_) / 2;
    Shape zshape = s.shape();
    zshape[1] = pad;
    Tensor z = zeros(zshape, {x.dtype(), x.device()});
    return cat({z, s, z}, 1);
  }
  std::int64_t in_, out_, stride_;
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
};

class CifarResNet final : public Module {
 public:
  CifarResNet(int depth, ResNetOptions o)
      : Module("CifarResNet"), checkpoint_stages_(o.checkpoint_stages) {
    REMAT_CHECK(depth >= 8 && (depth - 2) % 6 == 0,
                "cifar_resnet: depth must be 6n + 2 (20, 32, 44, 56, 110, 1202), got {}", depth);
    REMAT_CHECK(o.in_channels > 0 && o.num_classes > 0,
                "cifar_resnet: in_channels ({}) and num_classes ({}) must be positive",
                o.in_channels, o.num_classes);
    const int n = (depth - 2) / 6;
    stem_ = register_module("conv1", conv(o.in_channels, 16, 3, 1, 1));
    bn_ = register_module("bn1", std::make_shared<BatchNorm2d>(16));
    std::int64_t in = 16;
    for (int stage = 0; stage < 3; ++stage) {
      auto layer = std::make_shared<nn::Sequential>();
      const std::int64_t out = 16 << stage;
      for (int b = 0; b < n; ++b) {
        layer->push_back(std::make_shared<CifarBlock>(in, out, b == 0 && stage > 0 ? 2 : 1));
        in = out;
      }
      stages_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    fc_ = register_module("fc", std::make_shared<nn::Linear>(64, o.num_classes));
  }
  Tensor forward(const Tensor& x) override {
    REMAT_CHECK(x.dim() == 4, "CifarResNet: expected input [N, C, H, W], got shape {}", x.shape());
    Tensor h = bn_->forward(stem_->forward(x), {.residual = {}, .relu = true});
    for (std::size_t i = 0; i < stages_.size(); ++i)
      h = run_stage(stages_[i], h, checkpoint_stages_, "layer" + std::to_string(i + 1));
    h = mean(h, {2, 3});  // global average pooling
    return fc_->forward(h);
  }

 private:
  std::shared_ptr<Conv2d> stem_;
  std::shared_ptr<BatchNorm2d> bn_;
  std::vector<std::shared_ptr<nn::Sequential>> stages_;
  std::shared_ptr<nn::Linear> fc_;
  bool checkpoint_stages_;
};

// ImageNet blocks: basic (two 3x3) or bottleneck (1x1, 3x3, 1x1 with 4x expansion); projection
// shortcut (1x1 conv + BN) when the shape changes.
class ImageNetBlock final : public Module {
 public:
  ImageNetBlock(std::int64_t in, std::int64_t width, std::int64_t stride, bool bottleneck)
      : Module(bottleneck ? "Bottleneck" : "BasicBlock") {
    const std::int64_t out = bottleneck ? width * 4 : width;
    if (bottleneck) {
      layers_.push_back(register_module("conv1", conv(in, width, 1, 1, 0)));
      norms_.push_back(register_module("bn1", std::make_shared<BatchNorm2d>(width)));
      layers_.push_back(register_module("conv2", conv(width, width, 3, stride, 1)));
      norms_.push_back(register_module("bn2", std::make_shared<BatchNorm2d>(width)));
      layers_.push_back(register_module("conv3", conv(width, out, 1, 1, 0)));
      norms_.push_back(register_module("bn3", std::make_shared<BatchNorm2d>(out)));
    } else {
      layers_.push_back(register_module("conv1", conv(in, width, 3, stride, 1)));
      norms_.push_back(register_module("bn1", std::make_shared<BatchNorm2d>(width)));
      layers_.push_back(register_module("conv2", conv(width, width, 3, 1, 1)));
      norms_.push_back(register_module("bn2", std::make_shared<BatchNorm2d>(width)));
    }
    if (stride != 1 || in != out) {
      down_conv_ = register_module("downsample_conv", conv(in, out, 1, stride, 0));
      down_bn_ = register_module("downsample_bn", std::make_shared<BatchNorm2d>(out));
    }
  }
  Tensor forward(const Tensor& x) override {
    const std::size_t last = layers_.size() - 1;
    Tensor h = x;
    for (std::size_t i = 0; i < last; ++i) {
      h = region([this, i](const Tensor& t) { return layers_[i]->forward(t); }, "conv")(h);
      h = region(
          [this, i](const Tensor& t) {
            return norms_[i]->forward(t, {.residual = {}, .relu = true});
          },
          "bn_relu", true)(h);
    }
    h = region([this, last](const Tensor& t) { return layers_[last]->forward(t); }, "conv")(h);
    Tensor s = down_conv_
                   ? region([this](const Tensor& t) { return down_conv_->forward(t); }, "conv")(x)
                   : x;
    auto tail = [this, last](const std::vector<Tensor>& in) {
      Tensor shortcut = down_bn_ ? down_bn_->forward(in[1]) : in[1];
      return std::vector<Tensor>{
          norms_[last]->forward(in[0], {.residual = shortcut, .relu = true})};
    };
    return region(tail, "bn_add_relu", true)({h, s})[0];
  }

 private:
  std::vector<std::shared_ptr<Conv2d>> layers_;
  std::vector<std::shared_ptr<BatchNorm2d>> norms_;
  std::shared_ptr<Conv2d> down_conv_;
  std::shared_ptr<BatchNorm2d> down_bn_;
};

class ImageNetResNet final : public Module {
 public:
  ImageNetResNet(int depth, ResNetOptions o)
      : Module("ResNet"), checkpoint_stages_(o.checkpoint_stages) {
    std::vector<int> blocks;
    bool bottleneck = false;
    if (depth == 18)
      blocks = {2, 2, 2, 2};
    else if (depth == 34)
      blocks = {3, 4, 6, 3};
    else if (depth == 50)
      blocks = {3, 4, 6, 3}, bottleneck = true;
    else
      REMAT_THROW("imagenet_resnet: depth must be 18, 34 or 50, got {}", depth);
    REMAT_CHECK(o.in_channels > 0 && o.num_classes > 0,
                "imagenet_resnet: in_channels ({}) and num_classes ({}) must be positive",
                o.in_channels, o.num_classes);
    stem_ = register_module("conv1", conv(o.in_channels, 64, 7, 2, 3));
    bn_ = register_module("bn1", std::make_shared<BatchNorm2d>(64));
    pool_ = register_module("maxpool", std::make_shared<nn::MaxPool2d>(3, 2, 1));
    std::int64_t in = 64;
    for (int stage = 0; stage < 4; ++stage) {
      auto layer = std::make_shared<nn::Sequential>();
      const std::int64_t width = 64 << stage;
      for (int b = 0; b < blocks[stage]; ++b) {
        layer->push_back(
            std::make_shared<ImageNetBlock>(in, width, b == 0 && stage > 0 ? 2 : 1, bottleneck));
        in = bottleneck ? width * 4 : width;
      }
      stages_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    fc_ = register_module("fc", std::make_shared<nn::Linear>(in, o.num_classes));
  }
  Tensor forward(const Tensor& x) override {
    REMAT_CHECK(x.dim() == 4, "ResNet: expected input [N, C, H, W], got shape {}", x.shape());
    Tensor h = pool_->forward(bn_->forward(stem_->forward(x), {.residual = {}, .relu = true}));
    for (std::size_t i = 0; i < stages_.size(); ++i)
      h = run_stage(stages_[i], h, checkpoint_stages_, "layer" + std::to_string(i + 1));
    return fc_->forward(mean(h, {2, 3}));
  }

 private:
  std::shared_ptr<Conv2d> stem_;
  std::shared_ptr<BatchNorm2d> bn_;
  std::shared_ptr<nn::MaxPool2d> pool_;
  std::vector<std::shared_ptr<nn::Sequential>> stages_;
  std::shared_ptr<nn::Linear> fc_;
  bool checkpoint_stages_;
};

}  // namespace

std::shared_ptr<nn::Module> cifar_resnet(int depth, ResNetOptions options) {
  return std::make_shared<CifarResNet>(depth, options);
}

std::shared_ptr<nn::Module> imagenet_resnet(int depth, ResNetOptions options) {
  return std::make_shared<ImageNetResNet>(depth, options);
}

std::shared_ptr<nn::Module> resnet(const std::string& name, ResNetOptions options) {
  REMAT_CHECK(name.rfind("resnet", 0) == 0,
              "resnet: unknown model '{}' (expected resnet20, resnet32, resnet44, "
              "resnet56, resnet110, resnet1202, resnet18, resnet34 or resnet50)",
              name);
  int depth = 0;
  try {
    depth = std::stoi(name.substr(6));
  } catch (const std::exception&) {
    REMAT_THROW("resnet: unknown model '{}'", name);
  }
  if (depth == 18 || depth == 34 || depth == 50) return imagenet_resnet(depth, options);
  return cifar_resnet(depth, options);
}

}  // namespace remat::models
