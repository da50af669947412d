#include "core/allocator.h"

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "core/cuda.h"
#include "core/error.h"
#include "core/segment_allocator.h"

namespace remat {
namespace {

// Freed memory stays in the process: glibc otherwise unmaps its large chunks and trims its heap
// as soon as they are free, and the next allocation faults every page in again (oneDNN's GEMM
// allocates and frees its packing buffers on every call: about 1,300 faults per Transformer LM
// step).  The pool's blocks come from the same heap: a block the pool releases under a budget
// goes back to the heap, which serves later requests of any size from it (splitting and
// merging), so a budgeted step faults in no fresh page either.  Mapping large blocks directly
// and unmapping them on release instead cost a ResNet-20 step at half its peak 164 ms against
// 148 (18,000 faults a step); the process then holds the budget plus the heap's fragmentation
// (15 MiB at a 40 MiB budget, ResNet-20, from its maximum resident set).
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// Blocks are cached by exact size (rounded to the alignment): training steps repeat their sizes,
// so exact reuse is the common case, and no block hides more than 63 unused bytes.  Without
// `backed`, the same bookkeeping runs over no memory at all (the offline simulator's pool).
class CachingCpuAllocator final : public Allocator {
 public:
  explicit CachingCpuAllocator(bool backed = true, std::size_t rounding = kBufferAlignment)
      : backed_(backed), rounding_(rounding) {
    if (backed_) keep_freed_memory();
  }
  ~CachingCpuAllocator() override { release_all_cached(); }
  Device device() const override { return Device::cpu(); }
  bool backed() const override { return backed_; }

  std::size_t size_class(std::size_t bytes) const override {
    if (bytes == 0) bytes = 1;
    return (bytes + rounding_ - 1) / rounding_ * rounding_;
  }

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
    if (!backed_) {
      // A distinct, never dereferenced address: a resident block must not look empty.
      std::lock_guard lock(mu_);
      fake_next_ += size;
      return {reinterpret_cast<void*>(fake_next_), size};
    }
    void* p = fresh(size);
    if (!p) {
      release_all_cached();
      p = fresh(size);
    }
    if (!p) return {};
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

  bool has_cached(std::size_t size_class) const override {
    std::lock_guard lock(mu_);
    auto it = free_.find(size_class);
    return it != free_.end() && !it->second.empty();
  }

  std::size_t largest_free_block() const override {
    std::lock_guard lock(mu_);
    for (auto it = free_.rbegin(); it != free_.rend(); ++it)
      if (!it->second.empty()) return it->first;
    return 0;
  }

  std::size_t release_cached(std::size_t bytes, std::size_t keep_class) override {
    std::lock_guard lock(mu_);
    std::size_t released = 0;
    // Largest blocks first: fewest frees for the bytes asked.
    for (auto it = free_.end(); it != free_.begin() && released < bytes;) {
      --it;
      const std::size_t keep = it->first == keep_class ? 1 : 0;
      auto& ptrs = it->second;
      while (ptrs.size() > keep && released < bytes) {
        if (backed_) give_back(ptrs.back(), it->first);
        ptrs.pop_back();
        released += it->first;
      }
      if (ptrs.empty()) it = free_.erase(it);
    }
    cached_ -= released;
    return released;
  }

 private:
  static void* fresh(std::size_t size) { return std::aligned_alloc(kBufferAlignment, size); }
  static void give_back(void* p, std::size_t /*size*/) { std::free(p); }

  const bool backed_;
  const std::size_t rounding_;
  std::uintptr_t fake_next_ = 0;
  mutable std::mutex mu_;
  // A size whose blocks all went keeps its entry (and its vector's capacity: freeing and
  // reusing one block allocates nothing); release_cached drops the empty entries it passes, or
  // every later release would walk them again (a TreeLSTM's steps leave hundreds of sizes
  // behind: in 6 steps of batch 128, 451, which made most of the pool's search time at a
  // sample of 16 cells).
  std::map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_ = 0;
};

}  // namespace

std::unique_ptr<Allocator> make_accounting_cpu_allocator(std::size_t rounding) {
  REMAT_CHECK(rounding > 0, "make_accounting_cpu_allocator: rounding must be positive");
  return std::make_unique<CachingCpuAllocator>(false, rounding);
}

namespace {

// Device memory from cudaMalloc in segments (one driver call per segment, none per block).
class CudaSegmentSource final : public SegmentSource {
 public:
  explicit CudaSegmentSource(int index) : index_(index) {}
  Device device() const override { return Device::cuda(index_); }
  void* map(std::size_t bytes) override { return detail::cuda_memory::malloc(index_, bytes); }
  void unmap(void* p, std::size_t) override { detail::cuda_memory::free(index_, p); }

 private:
  int index_;
};

Allocator& cuda_allocator(Device device) {
  const int count = cuda::device_count();
  REMAT_CHECK(count > 0, "no allocator for device {}: {}", device, cuda::unavailable_reason());
  REMAT_CHECK(device.index >= 0 && device.index < count,
              "no allocator for device {}: this process sees {} CUDA device(s)", device, count);
  // Never destroyed (cells may be freed during static destruction); built once per device.
  static auto* allocators = new std::vector<std::unique_ptr<Allocator>>(count);
  static std::mutex mu;
  std::lock_guard lock(mu);
  auto& a = (*allocators)[device.index];
  if (!a) a = make_segment_allocator(std::make_unique<CudaSegmentSource>(device.index));
  return *a;
}

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cuda()) return cuda_allocator(device);
  REMAT_CHECK(device.is_cpu(), "no allocator for device {}", device);
  // Never destroyed: cells may be freed during static destruction.
  static auto* cpu = new CachingCpuAllocator();
  return *cpu;
}

}  // namespace remat
