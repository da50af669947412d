// The CUDA devices this process can use, and why there are none when there are none (no GPU, no
// driver, or a build without the CUDA backend).  Tests that need a GPU skip with that reason.
// Usage: if (!cuda::available()) GTEST_SKIP() << cuda::unavailable_reason();
#pragma once
#include <cstddef>
#include <string>

namespace remat::cuda {

// Whether this build has the CUDA backend (nvcc, cuBLAS and cuDNN were found).
bool built_with_cuda();
// Devices visible to the process: 0 without a GPU, a driver or the backend.
int device_count();
bool available();
// Empty when a device is available; otherwise what is missing, e.g. "no CUDA device: ...".
std::string unavailable_reason();

}  // namespace remat::cuda

namespace remat::detail::cuda_memory {
// Device memory for the allocator under the pool and copies between host and device.  malloc
// returns nullptr when the device is out of memory (the pool then evicts); everything else
// throws remat::Error naming the CUDA error.  The copies are synchronous.
void* malloc(int device, std::size_t bytes);
void free(int device, void* p);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void copy_from_host(void* dst, const void* src, std::size_t bytes);
void copy_on_device(void* dst, const void* src, std::size_t bytes);
void memset_zero(void* dst, std::size_t bytes);
// Waits for every kernel queued on the current device (the op profiler's timing only).
void synchronize();
}  // namespace remat::detail::cuda_memory
