// Internal: strided element-wise loops for CPU kernels.  Inputs are broadcast to the output's
// shape through zero strides; dimensions are coalesced so contiguous data runs in one
// vectorisable inner loop.  Usage:
//   map_kernel<float>(out, {a, b}, [](const float* x[], ...) ...)  -- see binary_map below.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "core/tensor_meta.h"

namespace remat::detail {

// Calls f.template operator()<T>() with T the C++ type of `dtype`.
template <class F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
    case DType::Int64:
      return f.template operator()<std::int64_t>();
  }
  REMAT_THROW("unknown dtype");
}
template <class F>
decltype(auto) visit_floating(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
    default:
      REMAT_THROW("expected a floating-point dtype, got {}", dtype);
  }
}

// Strides of `in` as seen from an output of shape `out_shape` (broadcast dims get stride 0).
// A contiguous tensor seen as [outer, n, inner] around one dim (a 0-dim tensor: [1, 1, 1]), for
// kernels that walk along that dim (cumsum, topk).
struct DimSplit {
  std::int64_t outer = 1, n = 1, inner = 1;
  DimSplit(const Shape& s, std::int64_t dim) {
    for (std::int64_t d = 0; d < dim; ++d) outer *= s[d];
    for (std::size_t d = static_cast<std::size_t>(dim) + 1; d < s.size(); ++d) inner *= s[d];
    if (!s.empty()) n = s[dim];
  }
};

inline Shape broadcast_strides(const TensorMeta& in, const Shape& out_shape) {
  Shape s(out_shape.size(), 0);
  const std::size_t lead = out_shape.size() - in.shape.size();
  for (std::size_t i = 0; i < in.shape.size(); ++i)
    s[lead + i] = in.shape[i] == 1 ? 0 : in.strides[i];
  return s;
}

// An N-operand strided iteration plan over `shape`, with operand 0 the output.
template <std::size_t N>
struct LoopPlan {
  Shape shape;                   // coalesced
  std::array<Shape, N> strides;  // per operand, coalesced
  std::int64_t numel = 1;

  LoopPlan(Shape full_shape, std::array<Shape, N> full_strides) {
    // Drop size-1 dims, then merge neighbours that are contiguous for every operand.
    for (std::size_t d = 0; d < full_shape.size(); ++d) {
      if (full_shape[d] == 1) continue;
      const bool merge = !shape.empty() && [&] {
        for (std::size_t k = 0; k < N; ++k)
          if (strides[k].back() != full_strides[k][d] * full_shape[d]) return false;
        return true;
      }();
      if (merge) {
        shape.back() *= full_shape[d];
        for (std::size_t k = 0; k < N; ++k) strides[k].back() = full_strides[k][d];
      } else {
        shape.push_back(full_shape[d]);
        for (std::size_t k = 0; k < N; ++k) strides[k].push_back(full_strides[k][d]);
      }
    }
    if (shape.empty()) {
      shape.push_back(1);
      for (auto& s : strides) s.push_back(1);
    }
    for (auto d : shape) numel *= d;
  }
};

// Runs body(ptrs, inner_strides, n) over rows of the innermost dimension; ptrs are byte-free
// element pointers of each operand at the row start.  Rows are split across threads.
template <std::size_t N, class Body>
void for_each_row(const LoopPlan<N>& plan, std::array<char*, N> base,
                  std::array<std::int64_t, N> elem_size, Body&& body) {
  const std::size_t nd = plan.shape.size();
  const std::int64_t inner = plan.shape[nd - 1];
  const std::int64_t rows = plan.numel / std::max<std::int64_t>(inner, 1);
  std::array<std::int64_t, N> inner_stride;
  for (std::size_t k = 0; k < N; ++k) inner_stride[k] = plan.strides[k][nd - 1];
  const std::int64_t grain = grain_for(inner);
  auto chunk = [&](std::int64_t r0, std::int64_t r1) {
    Shape idx(nd, 0);  // inline: no heap for up to 6 dims
    // Decompose r0 into outer indices.
    std::int64_t r = r0;
    for (std::size_t d = nd - 1; d-- > 0;) {
      idx[d] = r % plan.shape[d];
      r /= plan.shape[d];
    }
    for (std::int64_t row = r0; row < r1; ++row) {
      std::array<char*, N> p;
      for (std::size_t k = 0; k < N; ++k) {
        std::int64_t off = 0;
        for (std::size_t d = 0; d + 1 < nd; ++d) off += idx[d] * plan.strides[k][d];
        p[k] = base[k] + off * elem_size[k];
      }
      body(p, inner_stride, inner);
      for (std::size_t d = nd - 1; d-- > 0;) {
        if (++idx[d] < plan.shape[d]) break;
        idx[d] = 0;
      }
    }
  };
  // One chunk runs here: no std::function (a heap capture) and no thread hand-off.
  if (rows <= grain)
    chunk(0, rows);
  else
    parallel_for(0, rows, grain, chunk);
}

// Elements per staged block of map_kernel: small enough for the stack and L1, large enough that
// the per-block bookkeeping is noise.
inline constexpr std::int64_t kMapBlock = 256;

// out[i] = f(in0[i], in1[i], ...) with broadcasting; Out and In are element types.  The loop
// that calls f is always unit-stride, so it vectorises: a broadcast operand (inner stride 0) is
// one value spread over a block once per row, a strided operand is gathered into a block, and a
// strided output is computed into a block and scattered.  Every element gets the same f on the
// same values as a plain loop, so results do not depend on the path.
template <class Out, class... In, class F>
void map_kernel(const KernelArg& out, std::array<KernelArg, sizeof...(In)> ins, F f) {
  constexpr std::size_t N = sizeof...(In) + 1;
  const Shape& shape = out.meta->shape;
  std::array<Shape, N> strides;
  strides[0] = out.meta->strides;
  for (std::size_t k = 0; k < sizeof...(In); ++k)
    strides[k + 1] = broadcast_strides(*ins[k].meta, shape);
  LoopPlan<N> plan(shape, strides);
  if (shape_numel(shape) == 0) return;
  std::array<char*, N> base;
  base[0] = reinterpret_cast<char*>(out.data<Out>());
  std::array<std::int64_t, N> es{static_cast<std::int64_t>(sizeof(Out)),
                                 static_cast<std::int64_t>(sizeof(In))...};
  {
    std::size_t k = 1;
    ((base[k] = reinterpret_cast<char*>(ins[k - 1].template data<In>()), ++k), ...);
  }
  // f by value: through a reference the compiler cannot tell that the stores leave the
  // values it captured alone, and the loop stays scalar.
  auto unit_loop = [f]<class... P>(Out* o, std::int64_t n, const P*... ip) {
    for (std::int64_t i = 0; i < n; ++i) o[i] = f(ip[i]...);
  };
  for_each_row<N>(
      plan, base, es,
      [&](const std::array<char*, N>& p, const std::array<std::int64_t, N>& s, std::int64_t n) {
        Out* o = reinterpret_cast<Out*>(p[0]);
        auto run = [&]<std::size_t... I>(std::index_sequence<I...>) {
          const auto ip = std::make_tuple(reinterpret_cast<const In*>(p[I + 1])...);
          if (s[0] == 1 && ((s[I + 1] == 1) && ...)) {
            unit_loop(o, n, std::get<I>(ip)...);
            return;
          }
          // Staged blocks: broadcast operands are filled once, the rest per block.
          std::tuple<std::array<In, kMapBlock>...> stage;
          ((s[I + 1] == 0 ? std::get<I>(stage).fill(std::get<I>(ip)[0]) : void()), ...);
          std::array<Out, kMapBlock> out_block;
          for (std::int64_t b = 0; b < n; b += kMapBlock) {
            const std::int64_t m = std::min(kMapBlock, n - b);
            auto operand = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
              using T = std::tuple_element_t<K, std::tuple<In...>>;
              const T* src = std::get<K>(ip);
              const std::int64_t st = s[K + 1];
              if (st == 1) return src + b;
              if (st != 0)
                for (std::int64_t i = 0; i < m; ++i) std::get<K>(stage)[i] = src[(b + i) * st];
              return static_cast<const T*>(std::get<K>(stage).data());
            };
            Out* dst = s[0] == 1 ? o + b : out_block.data();
            unit_loop(dst, m, operand(std::integral_constant<std::size_t, I>{})...);
            if (s[0] != 1)
              for (std::int64_t i = 0; i < m; ++i) o[(b + i) * s[0]] = out_block[i];
          }
        };
        run(std::index_sequence_for<In...>{});
      });
}

}  // namespace remat::detail
