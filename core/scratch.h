// Per-thread scratch memory that kernels reuse from call to call: oneDNN's convolution
// workspaces, fused attention's score blocks.  A buffer only grows, so a training step in steady
// state allocates nothing and faults in no page; what all of them hold is counted
// (scratch_bytes), beside the pool's resident and cached bytes, though outside the budget.
// Usage: thread_local ScratchBuffer s; float* p = s.get<float>(n);
#pragma once
#include <cstddef>

namespace remat {

class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer();
  // At least `bytes` bytes, 64-byte aligned; the contents are not kept when it grows.
  void* get(std::size_t bytes);
  template <class T>
  T* get(std::size_t count) {
    return static_cast<T*>(get(count * sizeof(T)));
  }

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
};

// Bytes held by every thread's scratch buffers.
std::size_t scratch_bytes();

}  // namespace remat
