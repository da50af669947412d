// The nn layer in one include: modules and layers, initialisation, optimizers and learning-rate
// schedules, serialization, datasets, transforms and data loading.
// Usage: #include "nn/nn.h"  then  auto net = std::make_shared<remat::nn::Linear>(784, 10);
#pragma once
#include "nn/clip_grad.h"
#include "nn/data.h"
#include "nn/functional_optim.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/listops.h"
#include "nn/lr_scheduler.h"
#include "nn/mnist.h"
#include "nn/module.h"
#include "nn/module_list.h"
#include "nn/optim.h"
#include "nn/rnn.h"
#include "nn/sequential.h"
#include "nn/serialize.h"
#include "nn/text.h"
#include "nn/transformer.h"
#include "nn/transforms.h"
