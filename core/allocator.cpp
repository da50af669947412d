#include "core/allocator.h"

#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace remat {
namespace {

// Size classes: multiples of 64 bytes up to 4 KiB, then four classes per power of two, so a
// reused block wastes at most a quarter of its size.
std::size_t size_class(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= 4096) return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  const std::size_t top = std::bit_floor(bytes);
  const std::size_t step = top / 4;
  return (bytes + step - 1) / step * step;
}

class CachingCpuAllocator final : public Allocator {
 public:
  ~CachingCpuAllocator() override { release_cached(); }
  Device device() const override { return Device::cpu(); }

  Block allocate(std::size_t bytes) override {
    const std::size_t size = size_class(bytes);
    {
      std::lock_guard lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= size;
        return {p, size};
      }
    }
    void* p = std::aligned_alloc(kBufferAlignment, size);
    if (!p) {
      release_cached();
      p = std::aligned_alloc(kBufferAlignment, size);
    }
    REMAT_CHECK(p, "cpu allocator: out of memory allocating {} bytes", size);
    return {p, size};
  }

  void deallocate(Block block) override {
    if (!block.ptr) return;
    std::lock_guard lock(mu_);
    free_[block.size].push_back(block.ptr);
    cached_ += block.size;
  }

  std::size_t cached_bytes() const override {
    std::lock_guard lock(mu_);
    return cached_;
  }

  void release_cached() override {
    std::lock_guard lock(mu_);
    for (auto& [size, ptrs] : free_)
      for (void* p : ptrs) std::free(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_ = 0;
};

}  // namespace

Allocator& allocator_for(Device device) {
  REMAT_CHECK(device.is_cpu(), "no allocator for device {} in this build", device);
  // Never destroyed: cells may be freed during static destruction.
  static auto* cpu = new CachingCpuAllocator();
  return *cpu;
}

}  // namespace remat
