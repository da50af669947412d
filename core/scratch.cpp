#include "core/scratch.h"

#include <atomic>
#include <cstdlib>

#include "core/allocator.h"
#include "core/error.h"

namespace remat {
namespace {
std::atomic<std::size_t> g_scratch_bytes{0};
}  // namespace

ScratchBuffer::~ScratchBuffer() {
  std::free(data_);
  g_scratch_bytes -= capacity_;
}

void* ScratchBuffer::get(std::size_t bytes) {
  if (bytes <= capacity_) return data_;
  const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
  std::free(data_);
  g_scratch_bytes -= capacity_;
  capacity_ = 0;
  data_ = std::aligned_alloc(kBufferAlignment, rounded);
  REMAT_CHECK(data_ != nullptr, "scratch: cannot allocate {} bytes", rounded);
  capacity_ = rounded;
  g_scratch_bytes += capacity_;
  return data_;
}

std::size_t scratch_bytes() {
  return g_scratch_bytes.load();
}

}  // namespace remat
