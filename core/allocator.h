// Device memory under the DTR pool.  The CPU allocator caches freed blocks by size so a training
// step reuses its pages instead of touching fresh ones (about 10 us a page here); the pool above
// it decides what is resident, and under a budget counts cached bytes too, releasing them
// before it evicts anything.  Usage: Block b = allocator_for(Device::cpu()).allocate(1024);
#pragma once
#include <cstddef>
#include <memory>

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
  // Whether blocks are memory that can be read (false: the simulator's accounting, whose
  // addresses are never dereferenced).
  virtual bool backed() const { return true; }
  // The bytes a request of `bytes` really reserves.
  virtual std::size_t size_class(std::size_t bytes) const = 0;
  // A null block when the memory is exhausted (the pool evicts and retries, or reports
  // OutOfBudget).
  virtual Block allocate(std::size_t bytes) = 0;
  virtual void deallocate(Block block) = 0;
  // Bytes held in the cache, free for reuse but not returned to the system.
  virtual std::size_t cached_bytes() const = 0;
  // Whether a cached block of this size class is ready for reuse.
  virtual bool has_cached(std::size_t size_class) const = 0;
  // cached_bytes() after an allocation of `bytes`: what the budget will count beside the
  // resident bytes.  A fresh block that cannot come from the cache may bring more with it (a
  // segment allocator maps a whole segment).
  virtual std::size_t cached_after(std::size_t bytes) const {
    const std::size_t cls = size_class(bytes);
    const std::size_t cached = cached_bytes();
    return bytes && has_cached(cls) ? cached - cls : cached;
  }
  // The largest cached block: with cached_bytes(), how fragmented the cache is.
  virtual std::size_t largest_free_block() const = 0;
  // Whether freed blocks join their free neighbours (a segment allocator), and whether freeing
  // `block` would leave a free block a request of `size_class` can use.  The CPU's cache keeps
  // blocks whole, so eviction there never aims at a particular hole.
  virtual bool merges_free_blocks() const { return false; }
  virtual bool fits_if_freed(const Block& /*block*/, std::size_t /*size_class*/) const {
    return false;
  }
  // Returns cached blocks to the system, keeping one block of class `keep_class` (0: none; the
  // block an allocation is about to reuse), until at least `bytes` were released or nothing
  // else is cached; returns the bytes released.
  virtual std::size_t release_cached(std::size_t bytes, std::size_t keep_class = 0) = 0;
  void release_all_cached() { release_cached(static_cast<std::size_t>(-1)); }
};

// Alignment of every CPU buffer; oneDNN and the vectorised kernels rely on it.
inline constexpr std::size_t kBufferAlignment = 64;

Allocator& allocator_for(Device device);
// The CPU caching allocator's bookkeeping (size classes, cached bytes, release order) over no
// memory: blocks carry distinct addresses that must never be dereferenced.  The offline
// simulator runs a pool on it, so the pool sees exactly what it sees on the CPU.
// `rounding` 1 keeps exact sizes (the DTR prototype's simulator counts bytes unrounded).
std::unique_ptr<Allocator> make_accounting_cpu_allocator(std::size_t rounding = kBufferAlignment);

}  // namespace remat
