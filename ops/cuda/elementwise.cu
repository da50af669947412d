// Element-wise CUDA kernels: one thread per output element, the element's offset in every
// operand computed from its index over the extent (broadcasting through zero strides), so one
// kernel serves every layout.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "ops/cuda/common.cuh"
#include "ops/cuda/launch.h"
#include "ops/elementwise_math.h"

namespace remat::detail::cuda_launch {
namespace {

template <class T>
__global__ void fill_kernel(T* out, std::int64_t n, T v) {
  for (std::int64_t i = first_index(); i < n; i += index_step()) out[i] = v;
}

template <class T>
__global__ void arange_kernel(T* out, std::int64_t n, double start, double step) {
  for (std::int64_t i = first_index(); i < n; i += index_step())
    out[i] = static_cast<T>(start + step * static_cast<double>(i));
}

template <class To, class From>
__global__ void copy_kernel(Index ix, std::int64_t n, To* out, Strides so, const From* in,
                            Strides si) {
  const Strides strides[2] = {so, si};
  for (std::int64_t i = first_index(); i < n; i += index_step()) {
    std::int64_t off[2];
    ix.offsets(i, strides, off);
    out[off[0]] = static_cast<To>(in[off[1]]);
  }
}

template <class T, Binary K>
__global__ void binary_kernel(Index ix, std::int64_t n, T* out, Strides so, const T* a, Strides sa,
                              const T* b, Strides sb) {
  const Strides strides[3] = {so, sa, sb};
  for (std::int64_t i = first_index(); i < n; i += index_step()) {
    std::int64_t off[3];
    ix.offsets(i, strides, off);
    out[off[0]] = apply_binary<T>(K, a[off[1]], b[off[2]]);
  }
}

// The unary kinds as the CPU kernels compute them (ops/elementwise.cpp); transcendental functions
// are CUDA's, within a few ulp of the CPU's, not bit-equal to them.
template <class T>
__device__ T unary_value(Unary k, T x, T p, T q, bool has_p, bool has_q) {
  switch (k) {
    case Unary::Neg:
      return static_cast<T>(-x);
    case Unary::Abs:
      return x < T(0) ? static_cast<T>(-x) : x;
    case Unary::Sign:
      return static_cast<T>((T(0) < x) - (x < T(0)));
    case Unary::Relu:  // NaN propagates
      return (x > T(0)) || (x != x) ? x : T(0);
    case Unary::Clamp: {  // min(max(x, p), q), as PyTorch
      const T y = has_p && x < p ? p : x;
      return has_q && y > q ? q : y;
    }
    default:
      break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    constexpr double kSqrtHalf = 0.70710678118654752440;     // 1/sqrt(2)
    constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
    switch (k) {
      case Unary::Exp:
        return std::exp(x);
      case Unary::Log:
        return std::log(x);
      case Unary::Sqrt:
        return std::sqrt(x);
      case Unary::Rsqrt:
        return T(1) / std::sqrt(x);
      case Unary::Tanh:
        return std::tanh(x);
      case Unary::Sigmoid:
        return T(1) / (T(1) + std::exp(-x));
      case Unary::LeakyRelu:
        return x > T(0) ? x : static_cast<T>(x * p);
      case Unary::Gelu:
        return static_cast<T>(0.5 * x * (1.0 + std::erf(x * kSqrtHalf)));
      case Unary::Erf:
        return std::erf(x);
      case Unary::PowScalar:
        return std::pow(x, p);
      case Unary::Sin:
        return std::sin(x);
      case Unary::Cos:
        return std::cos(x);
      case Unary::Log1p:
        return std::log1p(x);
      case Unary::Expm1:
        return std::expm1(x);
      case Unary::Silu:
        return x / (T(1) + std::exp(-x));
      case Unary::GeluTanh: {
        const T c = static_cast<T>(kSqrt2OverPi);
        return T(0.5) * x * (T(1) + std::tanh(c * (x + T(0.044715) * x * x * x)));
      }
      case Unary::Softplus:  // linear above the threshold
        return p * x > q ? x : std::log1p(std::exp(p * x)) / p;
      case Unary::Elu:
        return x > T(0) ? x : p * std::expm1(x);
      default:
        break;
    }
  }
  return T(0);
}

// The kind is a kernel argument: every thread takes the same branch, and one kernel per type
// instead of one per kind keeps the CUDA compile short.
template <class T>
__global__ void unary_kernel(Index ix, std::int64_t n, Unary k, T* out, Strides so, const T* in,
                             Strides si, T p, T q, bool has_p, bool has_q) {
  const Strides strides[2] = {so, si};
  for (std::int64_t i = first_index(); i < n; i += index_step()) {
    std::int64_t off[2];
    ix.offsets(i, strides, off);
    out[off[0]] = unary_value<T>(k, in[off[1]], p, q, has_p, has_q);
  }
}

// As the CPU's InplaceOp (ops/inplace.cpp), the element's arithmetic in T.
template <class T>
__device__ T inplace_value(Inplace k, T s, T a, T b, T v) {
  switch (k) {
    case Inplace::AddScaled:
      return static_cast<T>(s + v * a);
    case Inplace::AddScalar:
      return static_cast<T>(s + v);
    case Inplace::Mul:
      return static_cast<T>(s * a);
    case Inplace::MulScalar:
      return static_cast<T>(s * v);
    case Inplace::Div:
      return static_cast<T>(s / a);
    case Inplace::Addcmul:
      return static_cast<T>(s + v * a * b);
    case Inplace::Addcdiv:
      return static_cast<T>(s + v * a / b);
    case Inplace::Fill:
      return v;
    case Inplace::Copy:
      break;
  }
  return s;
}

template <class T>
__global__ void inplace_kernel(Index ix, std::int64_t n, Inplace k, T* out, Strides so,
                               const T* self, Strides ss, const T* a, Strides sa, const T* b,
                               Strides sb, T v) {
  const Strides strides[4] = {so, ss, sa, sb};
  for (std::int64_t i = first_index(); i < n; i += index_step()) {
    std::int64_t off[4];
    ix.offsets(i, strides, off);
    out[off[0]] = inplace_value<T>(k, self[off[1]], a ? a[off[2]] : T(0), b ? b[off[3]] : T(0), v);
  }
}

template <class C, class T>
__global__ void where_kernel(Index ix, std::int64_t n, T* out, Strides so, const C* cond,
                             Strides sc, const T* a, Strides sa, const T* b, Strides sb) {
  const Strides strides[4] = {so, sc, sa, sb};
  for (std::int64_t i = first_index(); i < n; i += index_step()) {
    std::int64_t off[4];
    ix.offsets(i, strides, off);
    out[off[0]] = cond[off[1]] != C(0) ? a[off[2]] : b[off[3]];
  }
}

template <class T>
struct Accumulator {
  using type = double;
};
template <>
struct Accumulator<std::int64_t> {
  using type = std::int64_t;
};

template <class T>
__global__ void sum_kernel(Index kept, std::int64_t outputs, Strides ks, Index red,
                           std::int64_t reduced, Strides rs, const T* in, T* out) {
  const Strides kstrides[1] = {ks};
  const Strides rstrides[1] = {rs};
  for (std::int64_t o = first_index(); o < outputs; o += index_step()) {
    std::int64_t base_[1];
    kept.offsets(o, kstrides, base_);
    const std::int64_t base = base_[0];
    typename Accumulator<T>::type acc = 0;
    for (std::int64_t r = 0; r < reduced; ++r) {
      std::int64_t off_[1];
      red.offsets(r, rstrides, off_);
      const std::int64_t off = off_[0];
      acc += in[base + off];
    }
    out[o] = static_cast<T>(acc);
  }
}

// Long reductions: a block per output, each thread summing a fixed stride of the reduced
// elements, then a fixed tree in shared memory.  The order depends only on the shape, so a
// replay gives the same bits (not the CPU's order: results agree with it to rounding).  With a
// thread per output, a bias gradient (2048 outputs, 8192 rows each) kept 8 of 132 SMs busy.
template <class T>
__global__ void sum_block_kernel(Index kept, std::int64_t outputs, Strides ks, Index red,
                                 std::int64_t reduced, Strides rs, const T* in, T* out) {
  using Acc = typename Accumulator<T>::type;
  __shared__ Acc part[kThreads];
  const Strides kstrides[1] = {ks};
  const Strides rstrides[1] = {rs};
  for (std::int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    std::int64_t base_[1];
    kept.offsets(o, kstrides, base_);
    const std::int64_t base = base_[0];
    Acc acc = 0;
    for (std::int64_t r = threadIdx.x; r < reduced; r += blockDim.x) {
      std::int64_t off_[1];
      red.offsets(r, rstrides, off_);
      const std::int64_t off = off_[0];
      acc += in[base + off];
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[o] = static_cast<T>(part[0]);
    __syncthreads();
  }
}

template <class T, std::size_t... K>
void launch_binary(int kind, const Index& ix, std::int64_t n, const Operand& out, const Operand& a,
                   const Operand& b, std::index_sequence<K...>) {
  // One instantiation per kind, chosen on the host: the device loop has no switch.
  (void)((kind == static_cast<int>(K)
              ? (binary_kernel<T, static_cast<Binary>(K)>
                 <<<blocks_for(n), kThreads>>>(ix, n, static_cast<T*>(out.data), strides_of(out),
                                               static_cast<const T*>(a.data), strides_of(a),
                                               static_cast<const T*>(b.data), strides_of(b)),
                 true)
              : false) ||
         ...);
}

}  // namespace

void fill(Scalar t, void* out, std::int64_t n, double value) {
  if (n == 0) return;
  visit(t, [&](auto z) {
    using T = decltype(z);
    fill_kernel<T><<<blocks_for(n), kThreads>>>(static_cast<T*>(out), n, static_cast<T>(value));
  });
  check_launch("fill");
}

void arange(Scalar t, void* out, std::int64_t n, double start, double step) {
  if (n == 0) return;
  visit(t, [&](auto z) {
    using T = decltype(z);
    arange_kernel<T><<<blocks_for(n), kThreads>>>(static_cast<T*>(out), n, start, step);
  });
  check_launch("arange");
}

void copy(Scalar out_t, Scalar in_t, const Extent& extent, const Operand& out_operand,
          const Operand& in_operand) {
  const std::int64_t n = extent.numel();
  if (n == 0) return;
  Extent e = extent;
  Operand out = out_operand, in = in_operand;
  coalesce(e, {&out, &in});
  visit(out_t, [&](auto zo) {
    using To = decltype(zo);
    visit(in_t, [&](auto zi) {
      using From = decltype(zi);
      copy_kernel<To, From>
          <<<blocks_for(n), kThreads>>>(index_of(e), n, static_cast<To*>(out.data), strides_of(out),
                                        static_cast<const From*>(in.data), strides_of(in));
    });
  });
  check_launch("copy");
}

void binary(int kind, Scalar t, const Extent& extent, const Operand& out_operand,
            const Operand& a_operand, const Operand& b_operand) {
  const std::int64_t n = extent.numel();
  if (n == 0) return;
  Extent e = extent;
  Operand out = out_operand, a = a_operand, b = b_operand;
  coalesce(e, {&out, &a, &b});
  visit(t, [&](auto z) {
    using T = decltype(z);
    launch_binary<T>(kind, index_of(e), n, out, a, b,
                     std::make_index_sequence<static_cast<std::size_t>(Binary::Count)>{});
  });
  check_launch("binary");
}

void unary(int kind, Scalar t, const Extent& extent, const Operand& out_operand,
           const Operand& in_operand, double p, double q, bool has_p, bool has_q) {
  const std::int64_t n = extent.numel();
  if (n == 0) return;
  Extent e = extent;
  Operand out = out_operand, in = in_operand;
  coalesce(e, {&out, &in});
  visit(t, [&](auto z) {
    using T = decltype(z);
    unary_kernel<T><<<blocks_for(n), kThreads>>>(
        index_of(e), n, static_cast<Unary>(kind), static_cast<T*>(out.data), strides_of(out),
        static_cast<const T*>(in.data), strides_of(in), static_cast<T>(p), static_cast<T>(q), has_p,
        has_q);
  });
  check_launch("unary");
}

void inplace(int kind, Scalar t, const Extent& extent, const Operand& out_operand,
             const Operand& a_operand, const Operand& b_operand, const Operand& c_operand,
             double value) {
  const std::int64_t n = extent.numel();
  if (n == 0) return;
  Extent e = extent;
  Operand out = out_operand, a = a_operand, b = b_operand, c = c_operand;
  coalesce(e, {&out, &a, &b, &c});
  visit(t, [&](auto z) {
    using T = decltype(z);
    inplace_kernel<T><<<blocks_for(n), kThreads>>>(
        index_of(e), n, static_cast<Inplace>(kind), static_cast<T*>(out.data), strides_of(out),
        static_cast<const T*>(a.data), strides_of(a), static_cast<const T*>(b.data), strides_of(b),
        static_cast<const T*>(c.data), strides_of(c), static_cast<T>(value));
  });
  check_launch("inplace");
}

void where(Scalar cond_t, Scalar t, const Extent& extent, const Operand& out_operand,
           const Operand& cond_operand, const Operand& a_operand, const Operand& b_operand) {
  const std::int64_t n = extent.numel();
  if (n == 0) return;
  Extent e = extent;
  Operand out = out_operand, cond = cond_operand, a = a_operand, b = b_operand;
  coalesce(e, {&out, &cond, &a, &b});
  visit(cond_t, [&](auto zc) {
    using C = decltype(zc);
    visit(t, [&](auto z) {
      using T = decltype(z);
      where_kernel<C, T><<<blocks_for(n), kThreads>>>(
          index_of(e), n, static_cast<T*>(out.data), strides_of(out),
          static_cast<const C*>(cond.data), strides_of(cond), static_cast<const T*>(a.data),
          strides_of(a), static_cast<const T*>(b.data), strides_of(b));
    });
  });
  check_launch("where");
}

void sum(Scalar t, const Extent& kept_extent, const Operand& kept, const Extent& reduced_extent,
         const Operand& reduced, void* out) {
  const std::int64_t outputs = kept_extent.numel(), n = reduced_extent.numel();
  if (outputs == 0) return;
  // Which kernel depends on the shape only, so replays take the same one.
  constexpr std::int64_t kBlockPerOutput = 128;
  visit(t, [&](auto z) {
    using T = decltype(z);
    if (n >= kBlockPerOutput)
      sum_block_kernel<T>
          <<<static_cast<int>(outputs < 65535 * 32 ? outputs : 65535 * 32), kThreads>>>(
              index_of(kept_extent), outputs, strides_of(kept), index_of(reduced_extent), n,
              strides_of(reduced), static_cast<const T*>(kept.data), static_cast<T*>(out));
    else
      sum_kernel<T><<<blocks_for(outputs), kThreads>>>(
          index_of(kept_extent), outputs, strides_of(kept), index_of(reduced_extent), n,
          strides_of(reduced), static_cast<const T*>(kept.data), static_cast<T*>(out));
  });
  check_launch("sum");
}

}  // namespace remat::detail::cuda_launch
