#include "ops/cpu/onednn.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>

#include "core/error.h"
#include "core/parallel.h"
#include "core/scratch.h"

namespace remat::detail {

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // Nothing to multiply; oneDNN is not asked to handle the empty product.
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
    return;
  }
  // A small product runs on this thread alone: waking the other threads (a futex once they
  // sleep) costs more than the work; [64, 128] x [128, 512] products (an LSTM step, 2^22
  // multiply-adds) made two threads slower than one.  The choice depends on the shape only.
  constexpr double kSerialMacs = 1 << 23;
  const bool serial =
      static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) < kSerialMacs &&
      omp_get_max_threads() > 1;
  const int threads = omp_get_max_threads();
  if (serial) omp_set_num_threads(1);
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  if (serial) omp_set_num_threads(threads);
  REMAT_CHECK(status == dnnl_success,
              "matmul: oneDNN sgemm failed (status {}) for m={} n={} k={} lda={} ldb={} ldc={}",
              static_cast<int>(status), m, n, k, lda, ldb, ldc);
}

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

// Blocked copies of the operands and oneDNN's scratchpad live in one buffer per thread that
// only grows, so memory outside the pool is bounded by the largest convolution, not their sum.
ScratchBuffer& workspace() {
  thread_local ScratchBuffer w;
  return w;
}

enum class ConvKind { Forward, BackwardData, BackwardWeights };

constexpr std::string_view kind_name(ConvKind k) {
  switch (k) {
    case ConvKind::Forward:
      return "conv2d";
    case ConvKind::BackwardData:
      return "conv2d_backward_input";
    case ConvKind::BackwardWeights:
      return "conv2d_backward_weight";
  }
  return "conv2d";
}

// One operand of a cached primitive: the framework's plain layout, the layout the primitive
// chose (format_tag::any), and the reorder between them when they differ.
struct Operand {
  int arg = 0;
  memory::desc plain, inner;
  std::optional<dnnl::reorder> reorder;
  std::size_t offset = 0;  // of the blocked copy in the workspace
};

struct ConvEntry {
  dnnl::primitive primitive;
  std::array<Operand, 3> operands;  // input 0, input 1, output
  memory::desc bias;                // forward only; zero desc when there is none
  memory::desc scratchpad;
  std::size_t scratchpad_offset = 0, workspace_bytes = 0;
};

using ConvKey = std::array<std::int64_t, 21>;

ConvKey make_key(const ConvGeometry& g, ConvKind kind, bool bias) {
  // The thread count is part of the key: oneDNN fixes its work split when a primitive is
  // created, and the split decides the summation order, hence the bits.
  // clang-format off
  return {g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.oh, g.ow, g.stride_h, g.stride_w, g.pad_h, g.pad_w,
          g.extra_h, g.extra_w, g.dilation_h, g.dilation_w, g.groups,
          static_cast<std::int64_t>(kind), bias, num_threads()};
  // clang-format on
}

std::size_t align64(std::size_t n) {
  return (n + 63) / 64 * 64;
}

Operand make_operand(int arg, const memory::desc& plain, const memory::desc& chosen,
                     bool is_output) {
  Operand op;
  op.arg = arg;
  op.plain = plain;
  op.inner = chosen;
  if (plain != chosen) {
    auto& eng = cpu_engine();
    op.reorder = is_output ? dnnl::reorder(dnnl::reorder::primitive_desc(eng, chosen, eng, plain))
                           : dnnl::reorder(dnnl::reorder::primitive_desc(eng, plain, eng, chosen));
  }
  return op;
}

std::shared_ptr<ConvEntry> create_entry(const ConvGeometry& g, ConvKind kind, bool with_bias) {
  using namespace dnnl;
  auto& eng = cpu_engine();
  const memory::dims src{g.n, g.c, g.h, g.w}, dst{g.n, g.o, g.oh, g.ow};
  const memory::dims wei = g.groups == 1
                               ? memory::dims{g.o, g.c, g.kh, g.kw}
                               : memory::dims{g.groups, g.o / g.groups, g.c / g.groups, g.kh, g.kw};
  const memory::desc src_plain(src, kF32, Tag::nchw), dst_plain(dst, kF32, Tag::nchw),
      wei_plain(wei, kF32, g.groups == 1 ? Tag::oihw : Tag::goihw);
  const memory::desc src_any(src, kF32, Tag::any), dst_any(dst, kF32, Tag::any),
      wei_any(wei, kF32, Tag::any);
  const memory::dims strides{g.stride_h, g.stride_w}, dilates{g.dilation_h - 1, g.dilation_w - 1},
      padding{g.pad_h, g.pad_w}, padding_end{g.pad_h + g.extra_h, g.pad_w + g.extra_w};
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);

  auto entry = std::make_shared<ConvEntry>();
  const memory::desc bias_md = with_bias ? memory::desc({g.o}, kF32, Tag::x) : memory::desc();
  const convolution_forward::desc fwd_desc(prop_kind::forward_training,
                                           algorithm::convolution_direct, src_any, wei_any, bias_md,
                                           dst_any, strides, dilates, padding, padding_end);
  const convolution_forward::primitive_desc fwd_pd(fwd_desc, attr, eng);
  memory::desc scratch;
  switch (kind) {
    case ConvKind::Forward:
      entry->primitive = convolution_forward(fwd_pd);
      entry->operands = {make_operand(DNNL_ARG_SRC, src_plain, fwd_pd.src_desc(), false),
                         make_operand(DNNL_ARG_WEIGHTS, wei_plain, fwd_pd.weights_desc(), false),
                         make_operand(DNNL_ARG_DST, dst_plain, fwd_pd.dst_desc(), true)};
      entry->bias = bias_md;
      scratch = fwd_pd.scratchpad_desc();
      break;
    case ConvKind::BackwardData: {
      const convolution_backward_data::desc d(algorithm::convolution_direct, src_any, wei_any,
                                              dst_any, strides, dilates, padding, padding_end);
      const convolution_backward_data::primitive_desc pd(d, attr, eng, fwd_pd);
      entry->primitive = convolution_backward_data(pd);
      entry->operands = {make_operand(DNNL_ARG_DIFF_DST, dst_plain, pd.diff_dst_desc(), false),
                         make_operand(DNNL_ARG_WEIGHTS, wei_plain, pd.weights_desc(), false),
                         make_operand(DNNL_ARG_DIFF_SRC, src_plain, pd.diff_src_desc(), true)};
      scratch = pd.scratchpad_desc();
      break;
    }
    case ConvKind::BackwardWeights: {
      const convolution_backward_weights::desc d(algorithm::convolution_direct, src_any, wei_any,
                                                 dst_any, strides, dilates, padding, padding_end);
      const convolution_backward_weights::primitive_desc pd(d, attr, eng, fwd_pd);
      entry->primitive = convolution_backward_weights(pd);
      entry->operands = {
          make_operand(DNNL_ARG_SRC, src_plain, pd.src_desc(), false),
          make_operand(DNNL_ARG_DIFF_DST, dst_plain, pd.diff_dst_desc(), false),
          make_operand(DNNL_ARG_DIFF_WEIGHTS, wei_plain, pd.diff_weights_desc(), true)};
      scratch = pd.scratchpad_desc();
      break;
    }
  }
  std::size_t offset = 0;
  for (auto& op : entry->operands) {
    if (!op.reorder) continue;
    op.offset = offset;
    offset += align64(op.inner.get_size());
  }
  entry->scratchpad = scratch;
  entry->scratchpad_offset = offset;
  entry->workspace_bytes = offset + align64(scratch.get_size());
  return entry;
}

class ConvCache {
 public:
  // The engine is created first so that it outlives the cached primitives at exit.
  ConvCache() { cpu_engine(); }
  std::shared_ptr<const ConvEntry> get(const ConvGeometry& g, ConvKind kind, bool bias) {
    const ConvKey key = make_key(g, kind, bias);
    {
      std::lock_guard lock(mutex_);
      if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    }
    // Created outside the lock: creation may take milliseconds (JIT compilation).
    auto entry = create_entry(g, kind, bias);
    std::lock_guard lock(mutex_);
    return entries_.emplace(key, std::move(entry)).first->second;
  }
  std::size_t size() {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  std::mutex mutex_;
  std::map<ConvKey, std::shared_ptr<const ConvEntry>> entries_;
};

ConvCache& conv_cache() {
  static ConvCache cache;
  return cache;
}

std::string describe(const ConvGeometry& g) {
  return fmt::format(
      "input [{}, {}, {}, {}], weight [{}, {}, {}, {}], output [{}, {}, {}, {}], "
      "stride ({}, {}), padding ({}, {}) to ({}, {}), dilation ({}, {}), groups {}",
      g.n, g.c, g.h, g.w, g.o, g.groups ? g.c / g.groups : 0, g.kh, g.kw, g.n, g.o, g.oh, g.ow,
      g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.pad_h + g.extra_h, g.pad_w + g.extra_w,
      g.dilation_h, g.dilation_w, g.groups);
}

void run_conv(const ConvGeometry& g, ConvKind kind, const void* in0, const void* in1,
              const float* bias, void* out) {
  try {
    auto entry = conv_cache().get(g, kind, bias != nullptr);
    auto& eng = cpu_engine();
    auto& stream = cpu_stream();
    char* ws = workspace().get<char>(entry->workspace_bytes);
    const std::array<void*, 3> user_ptrs{const_cast<void*>(in0), const_cast<void*>(in1), out};
    std::array<memory, 3> user, inner;
    std::unordered_map<int, memory> args;
    for (std::size_t i = 0; i < 3; ++i) {
      const Operand& op = entry->operands[i];
      user[i] = memory(op.plain, eng, user_ptrs[i]);
      if (op.reorder) {
        inner[i] = memory(op.inner, eng, ws + op.offset);
        if (i < 2) op.reorder->execute(stream, user[i], inner[i]);
        args.emplace(op.arg, inner[i]);
      } else {
        args.emplace(op.arg, user[i]);
      }
    }
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(entry->bias, eng, const_cast<float*>(bias)));
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 memory(entry->scratchpad, eng, ws + entry->scratchpad_offset));
    entry->primitive.execute(stream, args);
    if (entry->operands[2].reorder) entry->operands[2].reorder->execute(stream, inner[2], user[2]);
    stream.wait();
  } catch (const dnnl::error& e) {
    REMAT_THROW("{}: oneDNN failed for {}: {}", kind_name(kind), describe(g), e.what());
  }
}

bool empty_problem(const ConvGeometry& g) {
  return g.n == 0 || g.c == 0 || g.o == 0 || g.h == 0 || g.w == 0 || g.oh == 0 || g.ow == 0;
}

}  // namespace

void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                    float* y) {
  if (empty_problem(g)) {
    // Every output (if any) sees an empty sum: it is the bias alone.
    const std::int64_t plane = g.oh * g.ow;
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t o = 0; o < g.o; ++o)
        std::fill_n(y + (n * g.o + o) * plane, plane, bias ? bias[o] : 0.f);
    return;
  }
  run_conv(g, ConvKind::Forward, x, w, bias, y);
}

void conv2d_backward_data(const ConvGeometry& g, const float* gy, const float* w, float* gx) {
  if (empty_problem(g)) {
    std::fill_n(gx, g.n * g.c * g.h * g.w, 0.f);
    return;
  }
  run_conv(g, ConvKind::BackwardData, gy, w, nullptr, gx);
}

void conv2d_backward_weights(const ConvGeometry& g, const float* x, const float* gy, float* gw) {
  if (empty_problem(g)) {
    std::fill_n(gw, g.o * (g.groups ? g.c / g.groups : 0) * g.kh * g.kw, 0.f);
    return;
  }
  run_conv(g, ConvKind::BackwardWeights, x, gy, nullptr, gw);
}

std::size_t conv_primitive_cache_size() {
  return conv_cache().size();
}

}  // namespace remat::detail
