#include "core/cuda.h"

#include "core/error.h"

#if REMAT_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace remat::cuda {

bool built_with_cuda() {
#if REMAT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

#if REMAT_WITH_CUDA
namespace {
// Asked once: the answer does not change while the process runs.
struct Probe {
  int count = 0;
  std::string reason;
  Probe() {
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      count = 0;
      reason =
          fmt::format("no CUDA device: {} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
      cudaGetLastError();  // clear the sticky error state of the failed query
    } else if (count == 0) {
      reason = "no CUDA device: the driver reports none";
    }
  }
};
const Probe& probe() {
  static const Probe p;
  return p;
}
}  // namespace

int device_count() {
  return probe().count;
}
std::string unavailable_reason() {
  return probe().reason;
}
#else
int device_count() {
  return 0;
}
std::string unavailable_reason() {
  return "no CUDA device: this build has no CUDA backend (REMAT_CUDA=OFF, or nvcc, cuBLAS or "
         "cuDNN were not found)";
}
#endif

bool available() {
  return device_count() > 0;
}

}  // namespace remat::cuda

namespace remat::detail::cuda_memory {

#if REMAT_WITH_CUDA
namespace {
void check(cudaError_t err, std::string_view what) {
  REMAT_CHECK(err == cudaSuccess, "CUDA {}: {} ({})", what, cudaGetErrorString(err),
              cudaGetErrorName(err));
}
}  // namespace

void* malloc(int device, std::size_t bytes) {
  check(cudaSetDevice(device), "cudaSetDevice");
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky, but clear it so later calls do not report it
    return nullptr;
  }
  check(err, fmt::format("cudaMalloc of {} bytes on cuda:{}", bytes, device));
  return p;
}
void free(int device, void* p) {
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaFree(p), "cudaFree");
}
void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy to the host");
}
void copy_from_host(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to the device");
}
void copy_on_device(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy on the device");
}
void memset_zero(void* dst, std::size_t bytes) {
  check(cudaMemset(dst, 0, bytes), "memset");
}
void synchronize() {
  check(cudaDeviceSynchronize(), "synchronize");
}
#else
namespace {
[[noreturn]] void unavailable() {
  REMAT_THROW("{}", remat::cuda::unavailable_reason());
}
}  // namespace
void* malloc(int, std::size_t) {
  unavailable();
}
void free(int, void*) {
  unavailable();
}
void copy_to_host(void*, const void*, std::size_t) {
  unavailable();
}
void copy_from_host(void*, const void*, std::size_t) {
  unavailable();
}
void copy_on_device(void*, const void*, std::size_t) {
  unavailable();
}
void memset_zero(void*, std::size_t) {
  unavailable();
}
void synchronize() {
  unavailable();
}
#endif

}  // namespace remat::detail::cuda_memory
