// Device memory under the DTR pool.  The CPU allocator caches freed blocks by size class so a
// training step reuses its pages instead of touching fresh ones (about 10 us a page here); the
// pool above it decides what is resident, this layer only hands out aligned bytes.
// Usage: Block b = allocator_for(Device::cpu()).allocate(1024); ... deallocate(b);
#pragma once
#include <cstddef>

#include "core/device.h"

namespace remat {

struct Block {
  void* ptr = nullptr;
  std::size_t size = 0;  // the size class actually reserved (>= the request)
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  virtual Block allocate(std::size_t bytes) = 0;
  virtual void deallocate(Block block) = 0;
  // Bytes held in the cache, free for reuse but not returned to the system.
  virtual std::size_t cached_bytes() const = 0;
  // Returns every cached block to the system.
  virtual void release_cached() = 0;
};

Allocator& allocator_for(Device device);
// Alignment of every CPU buffer; oneDNN and the vectorised kernels rely on it.
inline constexpr std::size_t kBufferAlignment = 64;

}  // namespace remat
