// CUDA kernels that walk a row or a reduced dim per thread: softmax and its derivative, the
// negative log-likelihood, max/min with their indices, gather and scatter_add, and the SGD
// update.  One
// thread per row keeps every sum in the CPU kernels' order and in double, so results are
// deterministic (the same bits on every replay); rows of many thousand elements would want a
// block per row.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/cuda/common.cuh"
#include "ops/cuda/launch.h"
#include "ops/nll_math.h"

namespace remat::detail::cuda_launch {
namespace {

template <class T>
__global__ void softmax_kernel(std::int64_t outer, std::int64_t d, std::int64_t inner, const T* x,
                               T* y, bool log) {
  for (std::int64_t c = first_index(); c < outer * inner; c += index_step()) {
    const std::int64_t base = (c / inner) * d * inner + c % inner;
    T m = x[base];
    for (std::int64_t k = 1; k < d; ++k) {
      const T v = x[base + k * inner];
      m = v > m ? v : m;
    }
    double s = 0;
    for (std::int64_t k = 0; k < d; ++k) {
      const T e = std::exp(x[base + k * inner] - m);
      y[base + k * inner] = e;
      s += static_cast<double>(e);
    }
    if (log) {
      const T lse = static_cast<T>(std::log(s));
      for (std::int64_t k = 0; k < d; ++k) y[base + k * inner] = (x[base + k * inner] - m) - lse;
    } else {
      const T inv = static_cast<T>(1.0 / s);
      for (std::int64_t k = 0; k < d; ++k) y[base + k * inner] *= inv;
    }
  }
}

template <class T>
__global__ void softmax_backward_kernel(std::int64_t rows, std::int64_t n, const T* g, const T* y,
                                        T* dx, bool log) {
  for (std::int64_t r = first_index(); r < rows; r += index_step()) {
    const T *gr = g + r * n, *yr = y + r * n;
    T* o = dx + r * n;
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i)
      s += log ? static_cast<double>(gr[i]) : static_cast<double>(gr[i]) * yr[i];
    const T st = static_cast<T>(s);
    for (std::int64_t i = 0; i < n; ++i)
      o[i] = log ? gr[i] - std::exp(yr[i]) * st : yr[i] * (gr[i] - st);
  }
}

// The first bad position in a kernel's input, per device (the largest value when none).
__device__ unsigned long long g_first_bad;

void reset_first_bad() {
  const unsigned long long none = std::numeric_limits<unsigned long long>::max();
  cudaMemcpyToSymbol(g_first_bad, &none, sizeof none);
}
std::int64_t read_first_bad(const char* what) {
  check_launch(what);
  unsigned long long v = 0;
  const cudaError_t err = cudaMemcpyFromSymbol(&v, g_first_bad, sizeof v);
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA kernel ") + what + ": " + cudaGetErrorString(err));
  return v == std::numeric_limits<unsigned long long>::max() ? -1 : static_cast<std::int64_t>(v);
}
__device__ void report_bad(std::int64_t position) {
  atomicMin(&g_first_bad, static_cast<unsigned long long>(position));
}

template <class T>
__global__ void nll_kernel(std::int64_t n_targets, std::int64_t classes, std::int64_t inner,
                           const T* logp, const std::int64_t* target, const T* weight,
                           std::int64_t ignore_index, T* loss, T* wt, std::int64_t* index) {
  for (std::int64_t i = first_index(); i < n_targets; i += index_step())
    if (!nll_target(i, classes, inner, logp, target, weight, ignore_index, loss, wt, index))
      report_bad(i);
}

template <class T>
__device__ bool is_nan(T v) {
  return v != v;
}

template <class T>
__global__ void extreme_kernel(bool is_max, Index kept, std::int64_t outputs, Strides ks,
                               std::int64_t reduced, std::int64_t stride, const T* x, T* values,
                               std::int64_t* indices) {
  const Strides strides[1] = {ks};
  for (std::int64_t o = first_index(); o < outputs; o += index_step()) {
    std::int64_t base_[1];
    kept.offsets(o, strides, base_);
    const std::int64_t base = base_[0];
    T best = x[base];
    std::int64_t best_i = 0;
    for (std::int64_t i = 1; i < reduced; ++i) {
      const T v = x[base + i * stride];
      if (is_nan(best)) break;
      if (is_nan(v) || (is_max ? v > best : v < best)) best = v, best_i = i;
    }
    values[o] = best;
    indices[o] = best_i;
  }
}

template <class T>
__global__ void scatter_add_kernel(Index slices, std::int64_t n_slices, std::int64_t count,
                                   const std::int64_t* index, Strides is, std::int64_t index_step_,
                                   const T* src, Strides ss, std::int64_t src_step, T* out,
                                   Strides os, std::int64_t out_step, std::int64_t out_size) {
  const Strides strides[3] = {is, ss, os};
  for (std::int64_t s = first_index(); s < n_slices; s += index_step()) {
    std::int64_t off[3];
    slices.offsets(s, strides, off);
    for (std::int64_t k = 0; k < count; ++k) {
      const std::int64_t at = index[off[0] + k * index_step_];
      if (at < 0 || at >= out_size) {
        report_bad(s * count + k);
        continue;
      }
      out[off[2] + at * out_step] += src[off[1] + k * src_step];
    }
  }
}

template <class T>
__global__ void gather_kernel(Index ix, std::int64_t n, const std::int64_t* index, Strides is,
                              const T* data, Strides ds, std::int64_t data_step,
                              std::int64_t data_size, T* out, Strides os) {
  const Strides strides[3] = {is, ds, os};
  for (std::int64_t i = first_index(); i < n; i += index_step()) {
    std::int64_t off[3];
    ix.offsets(i, strides, off);
    const std::int64_t at = index[off[0]];
    if (at < 0 || at >= data_size) {
      report_bad(i);
      out[off[2]] = T(0);
      continue;
    }
    out[off[2]] = data[off[1] + at * data_step];
  }
}

template <class T>
__global__ void sgd_kernel(std::int64_t n, const T* p_in, const T* buf_in, const T* g_in, T* p_out,
                           T* buf_out, T neg_lr, T mu, T damp, T wd, bool nesterov) {
  for (std::int64_t i = first_index(); i < n; i += index_step()) {
    const T p = p_in[i];
    T d = g_in[i];
    if (wd != T(0)) d = d + wd * p;
    if (buf_in) {
      T b = buf_in[i] * mu;
      b = b + damp * d;
      buf_out[i] = b;
      d = nesterov ? d + mu * b : b;
    }
    p_out[i] = p + neg_lr * d;
  }
}

}  // namespace

void softmax(Scalar t, std::int64_t outer, std::int64_t d, std::int64_t inner, const void* x,
             void* y, bool log) {
  if (outer * d * inner == 0) return;
  visit_floating(t, [&](auto z) {
    using T = decltype(z);
    softmax_kernel<T><<<blocks_for(outer * inner), kThreads>>>(
        outer, d, inner, static_cast<const T*>(x), static_cast<T*>(y), log);
  });
  check_launch("softmax");
}

void softmax_backward(Scalar t, std::int64_t rows, std::int64_t n, const void* g, const void* y,
                      void* dx, bool log) {
  if (rows * n == 0) return;
  visit_floating(t, [&](auto z) {
    using T = decltype(z);
    softmax_backward_kernel<T><<<blocks_for(rows), kThreads>>>(
        rows, n, static_cast<const T*>(g), static_cast<const T*>(y), static_cast<T*>(dx), log);
  });
  check_launch("softmax_backward");
}

std::int64_t nll_loss(Scalar t, std::int64_t n_targets, std::int64_t classes, std::int64_t inner,
                      const void* logp, const std::int64_t* target, const void* weight,
                      std::int64_t ignore_index, void* loss, void* wt, std::int64_t* index) {
  if (n_targets == 0) return -1;
  reset_first_bad();
  visit_floating(t, [&](auto z) {
    using T = decltype(z);
    nll_kernel<T><<<blocks_for(n_targets), kThreads>>>(
        n_targets, classes, inner, static_cast<const T*>(logp), target,
        static_cast<const T*>(weight), ignore_index, static_cast<T*>(loss), static_cast<T*>(wt),
        index);
  });
  return read_first_bad("nll_loss");
}

void extreme(bool is_max, Scalar t, const Extent& kept_extent, const Operand& kept,
             std::int64_t reduced, std::int64_t red_stride, void* values, std::int64_t* indices) {
  const std::int64_t outputs = kept_extent.numel();
  if (outputs == 0) return;
  visit(t, [&](auto z) {
    using T = decltype(z);
    extreme_kernel<T><<<blocks_for(outputs), kThreads>>>(
        is_max, index_of(kept_extent), outputs, strides_of(kept), reduced, red_stride,
        static_cast<const T*>(kept.data), static_cast<T*>(values), indices);
  });
  check_launch("max/min");
}

std::int64_t scatter_add(Scalar t, const Extent& slices, std::int64_t count, const Operand& index,
                         std::int64_t index_step, const Operand& src, std::int64_t src_step,
                         const Operand& out, std::int64_t out_step, std::int64_t out_size) {
  const std::int64_t n = slices.numel();
  if (n == 0 || count == 0) return -1;
  reset_first_bad();
  visit(t, [&](auto z) {
    using T = decltype(z);
    scatter_add_kernel<T><<<blocks_for(n), kThreads>>>(
        index_of(slices), n, count, static_cast<const std::int64_t*>(index.data), strides_of(index),
        index_step, static_cast<const T*>(src.data), strides_of(src), src_step,
        static_cast<T*>(out.data), strides_of(out), out_step, out_size);
  });
  return read_first_bad("scatter_add");
}

std::int64_t gather(Scalar t, const Extent& e, const Operand& index, const Operand& data,
                    std::int64_t data_step, std::int64_t data_size, const Operand& out) {
  const std::int64_t n = e.numel();
  if (n == 0) return -1;
  reset_first_bad();
  visit(t, [&](auto z) {
    using T = decltype(z);
    gather_kernel<T><<<blocks_for(n), kThreads>>>(
        index_of(e), n, static_cast<const std::int64_t*>(index.data), strides_of(index),
        static_cast<const T*>(data.data), strides_of(data), data_step, data_size,
        static_cast<T*>(out.data), strides_of(out));
  });
  return read_first_bad("gather");
}

void sgd_step(Scalar t, std::int64_t n, const void* param, const void* buf, const void* grad,
              void* param_out, void* buf_out, double lr, double momentum, double dampening,
              double weight_decay, bool nesterov) {
  if (n == 0) return;
  visit_floating(t, [&](auto z) {
    using T = decltype(z);
    sgd_kernel<T><<<blocks_for(n), kThreads>>>(
        n, static_cast<const T*>(param), static_cast<const T*>(buf), static_cast<const T*>(grad),
        static_cast<T*>(param_out), static_cast<T*>(buf_out), static_cast<T>(-lr),
        static_cast<T>(momentum), static_cast<T>(1 - dampening), static_cast<T>(weight_decay),
        nesterov);
  });
  check_launch("sgd_step_");
}

}  // namespace remat::detail::cuda_launch
