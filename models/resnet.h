// ResNets: the CIFAR-style ResNet-N of He et al. (N = 6n + 2: 20, 32, 44, 56, 110, 1202; three
// stages of 16/32/64 channels, identity shortcuts with zero-padded channels, "option A") and the
// ImageNet-style ResNet-18/34/50 (7x7 stem, max pooling, basic or bottleneck blocks, projection
// shortcuts).  Input channels, class count and checkpointed stages are options.
// Usage: auto net = models::resnet("resnet20", {.in_channels = 1, .num_classes = 10});
#pragma once
#include <memory>
#include <string>

#include "nn/module.h"

namespace remat::models {

struct ResNetOptions {
  std::int64_t in_channels = 3;
  std::int64_t num_classes = 10;
  // Checkpoint each stage: convolutions are SAVE regions, batch norm, ReLU and the residual
  // add are recomputed before the stage's backward (autograd/checkpoint.h).
  bool checkpoint_stages = false;
};

// CIFAR-style ResNet of the given depth (6n + 2).
std::shared_ptr<nn::Module> cifar_resnet(int depth, ResNetOptions options = {});
// ImageNet-style ResNet of depth 18, 34 or 50.
std::shared_ptr<nn::Module> imagenet_resnet(int depth, ResNetOptions options = {});
// By name: resnet20, resnet32, resnet44, resnet56, resnet110, resnet1202 (CIFAR style) and
// resnet18, resnet34, resnet50 (ImageNet style).
std::shared_ptr<nn::Module> resnet(const std::string& name, ResNetOptions options = {});

}  // namespace remat::models
