#include "ops/index.h"

#include "ops/cpu/loops.h"
#include "ops/factory.h"
#include "ops/op.h"
#include "ops/view.h"

namespace remat {
namespace {

// Shared by gather and scatter_add: index has the rank of the data; along `dim` it picks
// positions, elsewhere index and data must agree (index may be smaller, as torch allows).
void check_index(std::string_view op, const TensorMeta& data, std::int64_t dim, const TensorMeta& index) {
  REMAT_CHECK(index.dtype == DType::Int64, "{}: index must be int64, got {} (shape {})", op, index.dtype, index.shape);
  REMAT_CHECK(index.dim() == data.dim(), "{}: index of shape {} must have the rank of the input of shape {}",
              op, index.shape, data.shape);
  for (std::int64_t d = 0; d < data.dim(); ++d)
    REMAT_CHECK(d == dim || index.shape[d] <= data.shape[d],
                "{}: index shape {} exceeds input shape {} at dim {}", op, index.shape, data.shape, d);
}

// Visits every element of `index` (row-major) with the data offset it addresses along dim.
template <class F>
void for_each_indexed(std::string_view op, const TensorMeta& idx_meta, const std::int64_t* idx,
                      const TensorMeta& data, std::int64_t dim, F&& f) {
  const auto n = idx_meta.numel();
  const auto nd = idx_meta.dim();
  std::vector<std::int64_t> pos(nd, 0);
  for (std::int64_t e = 0; e < n; ++e) {
    std::int64_t ioff = 0, doff = data.offset;
    for (std::int64_t d = 0; d < nd; ++d) {
      ioff += pos[d] * idx_meta.strides[d];
      if (d != dim) doff += pos[d] * data.strides[d];
    }
    const std::int64_t k = idx[ioff];
    REMAT_CHECK(k >= 0 && k < data.shape[dim], "{}: index {} out of range for dim {} of size {}", op, k,
                dim, data.shape[dim]);
    f(e, pos, doff + k * data.strides[dim]);
    for (std::int64_t d = nd; d-- > 0;) {
      if (++pos[d] < idx_meta.shape[d]) break;
      pos[d] = 0;
    }
  }
}

class GatherOp final : public Op {
 public:
  explicit GatherOp(std::int64_t dim) : dim_(dim) {}
  std::string_view name() const override { return "gather"; }
  SaveSpec saves() const override { return {0b10, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    check_index("gather", in[0], dim_, in[1]);
    return {TensorMeta::contiguous(in[1].shape, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::visit_dtype(in[0].meta->dtype, [&]<class T>() {
      TensorMeta data = *in[0].meta;
      data.offset = 0;
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      for_each_indexed("gather", *in[1].meta, in[1].data<std::int64_t>(), data, dim_,
                       [&](std::int64_t e, const auto&, std::int64_t off) { y[e] = x[off]; });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const auto& m = c.input_meta(0);
    return {scatter_add(zeros(m.shape, {m.dtype, m.device}), dim_, c.input(1), c.grad(0)), Tensor()};
  }

 private:
  std::int64_t dim_;
};

class ScatterAddOp final : public Op {
 public:
  explicit ScatterAddOp(std::int64_t dim) : dim_(dim) {}
  std::string_view name() const override { return "scatter_add"; }
  SaveSpec saves() const override { return {0b010, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    check_index("scatter_add", in[0], dim_, in[1]);
    REMAT_CHECK(in[2].dtype == in[0].dtype, "scatter_add: src dtype {} differs from input dtype {}",
                in[2].dtype, in[0].dtype);
    for (std::int64_t d = 0; d < in[1].dim(); ++d)
      REMAT_CHECK(in[1].shape[d] <= in[2].shape[d], "scatter_add: index shape {} exceeds src shape {}",
                  in[1].shape, in[2].shape);
    return {TensorMeta::contiguous(in[0].shape, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::visit_dtype(in[0].meta->dtype, [&]<class T>() {
      detail::map_kernel<T, T>(out[0], {in[0]}, [](T v) { return v; });
      const TensorMeta& src = *in[2].meta;
      const T* s = static_cast<const T*>(in[2].base);
      T* y = out[0].data<T>();
      // Sequential in index order, so repeated indices sum deterministically.
      for_each_indexed("scatter_add", *in[1].meta, in[1].data<std::int64_t>(), *out[0].meta, dim_,
                       [&](std::int64_t, const std::vector<std::int64_t>& pos, std::int64_t off) {
                         std::int64_t soff = src.offset;
                         for (std::size_t d = 0; d < pos.size(); ++d) soff += pos[d] * src.strides[d];
                         y[off] += s[soff];
                       });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    Tensor gsrc;
    if (c.needs(2)) {
      gsrc = gather(c.grad(0), dim_, c.input(1));
      // src may be larger than index; only the indexed part receives gradient.
      const Shape& src_shape = c.input_meta(2).shape;
      if (gsrc.shape() != src_shape) {
        REMAT_THROW("scatter_add: gradient for a src larger than index (src {}, index {}) is not supported",
                    src_shape, c.input(1).shape());
      }
    }
    return {c.grad(0), Tensor(), gsrc};
  }

 private:
  std::int64_t dim_;
};

}  // namespace

Tensor gather(const Tensor& t, std::int64_t dim, const Tensor& index) {
  return call1(std::make_shared<GatherOp>(wrap_dim("gather", dim, t.dim())), {t, index});
}

Tensor scatter_add(const Tensor& t, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return call1(std::make_shared<ScatterAddOp>(wrap_dim("scatter_add", dim, t.dim())), {t, index, src});
}

}  // namespace remat
