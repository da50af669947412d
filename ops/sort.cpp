#include "ops/sort.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/index.h"
#include "ops/op.h"
#include "ops/view.h"

namespace remat {
namespace {

// The indices of the k extreme elements along dim of a contiguous input seen as
// [outer, n, inner].  Indices have no derivative; values come from gather.
class TopkIndicesOp final : public Op {
 public:
  TopkIndicesOp(std::int64_t k, std::int64_t dim, bool largest)
      : k_(k), dim_(dim), largest_(largest) {}
  std::string_view name() const override { return "topk"; }
  bool zero_derivative() const override { return true; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in[0].is_contiguous(), "topk: internal error, the input must be contiguous");
    Shape s = in[0].shape;
    if (!s.empty()) s[dim_] = k_;
    return {TensorMeta::contiguous(s, DType::Int64, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    // Plain names, not structured bindings: clang 14 cannot capture those in lambdas.
    const detail::DimSplit split(in[0].meta->shape, dim_);
    const std::int64_t outer = split.outer, n = split.n, inner = split.inner;
    detail::visit_dtype(in[0].meta->dtype, [&]<class T>() {
      const T* x = in[0].data<T>();
      std::int64_t* idx = out[0].data<std::int64_t>();
      parallel_for(0, outer * inner, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(n, 1)),
                   [&](std::int64_t b, std::int64_t e) {
                     std::vector<std::int64_t> order(static_cast<std::size_t>(n));
                     for (std::int64_t slice = b; slice < e; ++slice) {
                       const std::int64_t o = slice / inner, i = slice % inner;
                       const T* p = x + o * n * inner + i;
                       std::iota(order.begin(), order.end(), std::int64_t{0});
                       // A strict order: NaN beyond every number, then by value, ties by index.
                       auto before = [&](std::int64_t a, std::int64_t c) {
                         const T va = p[a * inner], vc = p[c * inner];
                         const bool na = is_nan(va), nc = is_nan(vc);
                         if (na || nc)
                           return largest_ ? (na && !nc) || (na && nc && a < c)
                                           : (!na && nc) || (na && nc && a < c);
                         if (va != vc) return largest_ ? va > vc : va < vc;
                         return a < c;
                       };
                       std::partial_sort(order.begin(), order.begin() + k_, order.end(), before);
                       std::int64_t* q = idx + o * k_ * inner + i;
                       for (std::int64_t j = 0; j < k_; ++j) q[j * inner] = order[j];
                     }
                   });
    });
  }

 private:
  template <class T>
  static bool is_nan(T v) {
    if constexpr (std::is_floating_point_v<T>)
      return std::isnan(v);
    else
      return false;
  }

  std::int64_t k_, dim_;
  bool largest_;
};

}  // namespace

std::pair<Tensor, Tensor> topk(const Tensor& t, std::int64_t k, std::int64_t dim, bool largest,
                               bool /*sorted*/) {
  REMAT_CHECK(t.defined(), "topk: undefined tensor");
  const std::int64_t d = t.dim() == 0 ? 0 : wrap_dim("topk", dim, t.dim());
  const std::int64_t n = t.dim() == 0 ? 1 : t.size(d);
  REMAT_CHECK(k >= 0 && k <= n && (t.dim() > 0 || k == 1),
              "topk: k ({}) out of range for dim {} of size {} (shape {})", k, d, n, t.shape());
  Tensor indices = call1(std::make_shared<TopkIndicesOp>(k, d, largest), {contiguous(t)});
  if (t.dim() == 0) return {t, indices};
  return {gather(t, d, indices), indices};
}

}  // namespace remat
