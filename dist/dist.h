// Data-parallel training: the communicator, its collectives and DistributedDataParallel.
// Usage: #include "dist/dist.h"  then  auto& world = remat::dist::init();
#pragma once
#include "dist/collectives.h"
#include "dist/communicator.h"
#include "dist/data_parallel.h"
