// What a tensor's storage offers.  core/ declares it; dtr::Cell is its only implementation, so
// every tensor buffer lives in the DTR cache while core/ never includes dtr/.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace remat {

// What a storage holds, as far as the layers above know; OutOfBudget breaks down the bytes that
// cannot be evicted by it.  Set by nn (parameters, optimizer state) and autograd (gradients).
enum class StorageRole : std::uint8_t {
  Other,
  Parameter,
  Gradient,
  EngineGradient,
  OptimizerState
};

class Storage {
 public:
  virtual ~Storage() = default;
  virtual Device device() const = 0;
  virtual std::size_t nbytes() const = 0;
  // A pointer to the resident bytes, making them resident first if the cache evicted them.
  // Valid until the next op call; element access and printing use it, kernels do not.
  virtual void* resident_data() = 0;
  // Called before the storage is written in place outside an op kernel (element writes).
  virtual void mark_mutated() {}
  // Keeps the bytes resident for as long as the storage lives, no longer recomputable: for
  // values every later step needs anyway (accumulated gradients), whose recomputation chain
  // would be the whole backward pass.
  virtual void freeze(StorageRole role = StorageRole::Other) { (void)role; }
  virtual void set_role(StorageRole) {}
  // Counts in-place writes, so autograd can tell that a saved tensor was modified.
  virtual std::uint64_t version() const { return 0; }
  // True only for a checkpoint replay's placeholder: metadata without data.  Every other
  // storage is a pool cell, so the dispatch path checks this instead of a dynamic_cast.
  virtual bool is_placeholder() const { return false; }
};

}  // namespace remat
