// The umbrella header: the whole public API of the framework.
// Usage: #include "remat.h"  then  auto x = remat::randn({2, 3}); auto y = remat::relu(x);
#pragma once
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/parallel.h"
#include "core/random.h"
#include "core/tensor.h"
#include "dtr/pool.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/index.h"
#include "ops/inplace.h"
#include "ops/reduce.h"
#include "ops/view.h"
