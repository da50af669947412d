#include "ops/index.h"

#include <algorithm>

#include "ops/cpu/loops.h"
#include "ops/cuda/device_args.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/join.h"
#include "ops/op.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace remat {
namespace {

// Shared by gather and scatter_add: index has the rank of the data; along `dim` it picks
// positions, elsewhere index and data must agree (index may be smaller, as torch allows).
void check_index(std::string_view op, const TensorMeta& data, std::int64_t dim,
                 const TensorMeta& index) {
  REMAT_CHECK(index.dtype == DType::Int64, "{}: index must be int64, got {} (shape {})", op,
              index.dtype, index.shape);
  REMAT_CHECK(index.dim() == data.dim(),
              "{}: index of shape {} must have the rank of the input of shape {}", op, index.shape,
              data.shape);
  for (std::int64_t d = 0; d < data.dim(); ++d)
    REMAT_CHECK(d == dim || index.shape[d] <= data.shape[d],
                "{}: index shape {} exceeds input shape {} at dim {}", op, index.shape, data.shape,
                d);
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
    REMAT_CHECK(k >= 0 && k < data.shape[dim], "{}: index {} out of range for dim {} of size {}",
                op, k, dim, data.shape[dim]);
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
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta &data = *in[0].meta, &index = *in[1].meta;
    detail::cuda_launch::Operand rows = detail::strided_operand(in[0]);
    rows.strides[dim_] = 0;  // the index picks the position along dim
    const std::int64_t bad =
        detail::cuda_launch::gather(detail::scalar_of(data.dtype), detail::extent_of(index.shape),
                                    detail::strided_operand(in[1]), rows, data.strides[dim_],
                                    data.shape[dim_], detail::strided_operand(out[0]));
    REMAT_CHECK(bad < 0,
                "gather: an index is out of range for dim {} of size {} (index shape {}, first bad "
                "element {})",
                dim_, data.shape[dim_], index.shape, bad);
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const auto& m = c.input_meta(0);
    return {scatter_add(zeros(m.shape, {m.dtype, m.device}), dim_, c.input(1), c.grad(0)),
            Tensor()};
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
      REMAT_CHECK(in[1].shape[d] <= in[2].shape[d],
                  "scatter_add: index shape {} exceeds src shape {}", in[1].shape, in[2].shape);
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
                         for (std::size_t d = 0; d < pos.size(); ++d)
                           soff += pos[d] * src.strides[d];
                         y[off] += s[soff];
                       });
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const TensorMeta &index = *in[1].meta, &y = *out[0].meta;
    detail::cuda_launch::copy(detail::scalar_of(y.dtype), detail::scalar_of(in[0].meta->dtype),
                              detail::extent_of(y.shape), detail::operand_of(out[0], y.shape),
                              detail::operand_of(in[0], y.shape));
    Shape slices = index.shape;
    slices[dim_] = 1;
    const std::int64_t bad = detail::cuda_launch::scatter_add(
        detail::scalar_of(y.dtype), detail::extent_of(slices), index.shape[dim_],
        detail::strided_operand(in[1]), index.strides[dim_], detail::strided_operand(in[2]),
        in[2].meta->strides[dim_], detail::strided_operand(out[0]), y.strides[dim_], y.shape[dim_]);
    REMAT_CHECK(bad < 0,
                "scatter_add: an index is out of range for dim {} of size {} (index shape {}, "
                "first bad slice {}, position {} along the dim)",
                dim_, y.shape[dim_], index.shape, bad / index.shape[dim_], bad % index.shape[dim_]);
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    Tensor gsrc;
    if (c.needs(2)) {
      gsrc = gather(c.grad(0), dim_, c.input(1));
      // src may be larger than index; only its leading corner was read, the rest gets zeros.
      const Shape& src_shape = c.input_meta(2).shape;
      for (std::int64_t d = 0; d < gsrc.dim(); ++d) {
        const std::int64_t missing = src_shape[d] - gsrc.shape()[d];
        if (missing == 0) continue;
        Shape pad = gsrc.shape();
        pad[d] = missing;
        gsrc = cat({gsrc, zeros(pad, {gsrc.dtype(), gsrc.device()})}, d);
      }
    }
    return {c.grad(0), Tensor(), gsrc};
  }

 private:
  std::int64_t dim_;
};

// ------------------------------------------------------------ index_select, index_add, embedding

// The values of an int64 tensor of any strides, in row-major order.
std::vector<std::int64_t> read_indices(const KernelArg& a) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(a.meta->numel()));
  const TensorMeta dst = TensorMeta::contiguous(a.meta->shape, DType::Int64, a.meta->device);
  detail::map_kernel<std::int64_t, std::int64_t>(KernelArg{&dst, out.data()}, {a},
                                                 [](std::int64_t k) { return k; });
  return out;
}

// Checked before any parallel loop, so a bad index is an error naming its value, never a crash.
void check_range(std::string_view op, const std::vector<std::int64_t>& idx, std::int64_t n,
                 std::int64_t dim) {
  for (auto k : idx)
    REMAT_CHECK(k >= 0 && k < n, "{}: index {} out of range for dim {} of size {}", op, k, dim, n);
}

// Index tensors of index_select/index_add: int64, at most 1-D (a 0-dim index picks one slab).
void check_index_vector(std::string_view op, const TensorMeta& data, std::int64_t dim,
                        const TensorMeta& index) {
  REMAT_CHECK(index.dtype == DType::Int64, "{}: index must be int64, got {} (shape {})", op,
              index.dtype, index.shape);
  REMAT_CHECK(index.dim() <= 1, "{}: index must be 1-D, got shape {} (input shape {})", op,
              index.shape, data.shape);
  REMAT_CHECK(data.dim() > 0 && dim < data.dim(), "{}: dim {} out of range for input of shape {}",
              op, dim, data.shape);
}

// out[..., j, ...] = x[..., idx[j], ...] along dim; out is contiguous with out.shape[dim] ==
// idx.size().
template <class T>
void select_slabs(const KernelArg& x, const KernelArg& out, std::int64_t dim,
                  const std::vector<std::int64_t>& idx) {
  const TensorMeta& xm = *x.meta;
  const TensorMeta& om = *out.meta;
  const auto k = static_cast<std::int64_t>(idx.size());
  if (om.numel() == 0) return;
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < dim; ++d) outer *= xm.shape[d];
  for (std::int64_t d = dim + 1; d < xm.dim(); ++d) inner *= xm.shape[d];
  const std::int64_t n = xm.shape[dim];
  const std::int64_t grain = grain_for(inner);
  if (xm.is_contiguous()) {
    const T* src = x.data<T>();
    T* dst = out.data<T>();
    parallel_for(0, outer * k, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const std::int64_t o = r / k, j = r % k;
        std::copy_n(src + (o * n + idx[j]) * inner, inner, dst + r * inner);
      }
    });
    return;
  }
  // Strided input: copy slab by slab through the strided loop.
  TensorMeta xs = xm, os = om;
  xs.shape[dim] = 1;
  os.shape[dim] = 1;
  parallel_for(0, k, std::max<std::int64_t>(1, grain / std::max<std::int64_t>(outer, 1)),
               [&](std::int64_t b, std::int64_t e) {
                 TensorMeta xw = xs, ow = os;
                 for (std::int64_t j = b; j < e; ++j) {
                   xw.offset = xm.offset + idx[j] * xm.strides[dim];
                   ow.offset = om.offset + j * om.strides[dim];
                   detail::map_kernel<T, T>(KernelArg{&ow, out.base}, {KernelArg{&xw, x.base}},
                                            [](T v) { return v; });
                 }
               });
}

// out[..., idx[j], ...] += src[..., j, ...] along dim, for j in order; out and src contiguous.
template <class T>
void add_slabs(const KernelArg& out, std::int64_t dim, const std::vector<std::int64_t>& idx,
               const KernelArg& src) {
  const TensorMeta& om = *out.meta;
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < dim; ++d) outer *= om.shape[d];
  for (std::int64_t d = dim + 1; d < om.dim(); ++d) inner *= om.shape[d];
  const std::int64_t n = om.shape[dim], k = static_cast<std::int64_t>(idx.size());
  const T* s = src.data<T>();
  T* y = out.data<T>();
  // Threads split the slab elements; each element sums its contributions in index order, so
  // repeated indices add up the same way on every run and for every thread count.
  parallel_for(0, inner, std::max<std::int64_t>(1024, inner / 64),
               [&](std::int64_t b, std::int64_t e) {
                 for (std::int64_t o = 0; o < outer; ++o)
                   for (std::int64_t j = 0; j < k; ++j) {
                     T* dst = y + (o * n + idx[j]) * inner;
                     const T* from = s + (o * k + j) * inner;
                     for (std::int64_t i = b; i < e; ++i) dst[i] += from[i];
                   }
               });
}

// The derivative of index_select and embedding: src's slabs summed into zeros of `shape` (the
// index_add of zeros without materialising the zeros first).  Inputs: index, contiguous src.
class IndexSelectBackwardOp final : public Op {
 public:
  IndexSelectBackwardOp(Shape shape, std::int64_t dim) : shape_(std::move(shape)), dim_(dim) {}
  std::string_view name() const override { return "index_select_backward"; }
  SaveSpec saves() const override { return {0b01, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta &index = in[0], &src = in[1];
    Shape expected = shape_;
    expected[dim_] = index.numel();
    REMAT_CHECK(src.shape == expected && src.is_contiguous(),
                "index_select_backward: gradient of shape {} does not match {}", src.shape,
                expected);
    return {TensorMeta::contiguous(shape_, src.dtype, src.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const auto idx = read_indices(in[0]);
    check_range("index_select_backward", idx, shape_[dim_], dim_);
    detail::visit_dtype(out[0].meta->dtype, [&]<class T>() {
      std::fill_n(out[0].data<T>(), out[0].meta->numel(), T(0));
      add_slabs<T>(out[0], dim_, idx, in[1]);
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {Tensor(), c.needs(1) ? index_select(c.grad(0), dim_, c.input(0)) : Tensor()};
  }

 private:
  Shape shape_;
  std::int64_t dim_;
};

Tensor index_select_backward(const Shape& shape, std::int64_t dim, const Tensor& index,
                             const Tensor& grad) {
  return call1(std::make_shared<IndexSelectBackwardOp>(shape, dim), {index, contiguous(grad)});
}

class IndexSelectOp final : public Op {
 public:
  explicit IndexSelectOp(std::int64_t dim) : dim_(dim) {}
  std::string_view name() const override { return "index_select"; }
  SaveSpec saves() const override { return {0b10, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    check_index_vector("index_select", in[0], dim_, in[1]);
    Shape s = in[0].shape;
    s[dim_] = in[1].numel();
    return {TensorMeta::contiguous(std::move(s), in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const auto idx = read_indices(in[1]);
    check_range("index_select", idx, in[0].meta->shape[dim_], dim_);
    detail::visit_dtype(in[0].meta->dtype,
                        [&]<class T>() { select_slabs<T>(in[0], out[0], dim_, idx); });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {index_select_backward(c.input_meta(0).shape, dim_, c.input(1), c.grad(0)), Tensor()};
  }

 private:
  std::int64_t dim_;
};

// out = t, then out[..., idx[j], ...] += src[..., j, ...] for j in order; src is contiguous.
class IndexAddOp final : public Op {
 public:
  explicit IndexAddOp(std::int64_t dim) : dim_(dim) {}
  std::string_view name() const override { return "index_add"; }
  SaveSpec saves() const override { return {0b010, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta &t = in[0], &index = in[1], &src = in[2];
    check_index_vector("index_add", t, dim_, index);
    REMAT_CHECK(src.dtype == t.dtype,
                "index_add: src dtype {} (shape {}) differs from input dtype {} (shape {})",
                src.dtype, src.shape, t.dtype, t.shape);
    bool ok = src.dim() == t.dim();
    for (std::int64_t d = 0; ok && d < t.dim(); ++d)
      ok = d == dim_ ? src.shape[d] == index.numel() : src.shape[d] == t.shape[d];
    REMAT_CHECK(
        ok,
        "index_add: src of shape {} does not match input of shape {} with {} indices along dim {}",
        src.shape, t.shape, index.numel(), dim_);
    return {TensorMeta::contiguous(t.shape, t.dtype, t.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const auto idx = read_indices(in[1]);
    const TensorMeta& om = *out[0].meta;
    check_range("index_add", idx, om.shape[dim_], dim_);
    detail::visit_dtype(om.dtype, [&]<class T>() {
      detail::map_kernel<T, T>(out[0], {in[0]}, [](T v) { return v; });
      add_slabs<T>(out[0], dim_, idx, in[2]);
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {c.needs(0) ? c.grad(0) : Tensor(), Tensor(),
            c.needs(2) ? index_select(c.grad(0), dim_, c.input(1)) : Tensor()};
  }

 private:
  std::int64_t dim_;
};

class EmbeddingOp final : public Op {
 public:
  std::string_view name() const override { return "embedding"; }
  SaveSpec saves() const override { return {0b10, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta &w = in[0], &idx = in[1];
    REMAT_CHECK(w.dim() == 2, "embedding: weight must be 2-D [num_embeddings, dim], got shape {}",
                w.shape);
    REMAT_CHECK(idx.dtype == DType::Int64, "embedding: indices must be int64, got {} (shape {})",
                idx.dtype, idx.shape);
    Shape s = idx.shape;
    s.push_back(w.shape[1]);
    return {TensorMeta::contiguous(std::move(s), w.dtype, w.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const auto idx = read_indices(in[1]);
    check_range("embedding", idx, in[0].meta->shape[0], 0);
    const TensorMeta rows =
        TensorMeta::contiguous({static_cast<std::int64_t>(idx.size()), in[0].meta->shape[1]},
                               out[0].meta->dtype, out[0].meta->device);
    detail::visit_dtype(in[0].meta->dtype, [&]<class T>() {
      select_slabs<T>(in[0], KernelArg{&rows, out[0].base}, 0, idx);
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const TensorMeta& w = c.input_meta(0);
    const Tensor flat_idx = reshape(c.input(1), {-1});
    const Tensor rows = reshape(c.grad(0), {flat_idx.numel(), w.shape[1]});
    return {index_select_backward(w.shape, 0, flat_idx, rows), Tensor()};
  }
};

class OneHotOp final : public Op {
 public:
  OneHotOp(std::int64_t classes, DType dtype) : classes_(classes), dtype_(dtype) {}
  std::string_view name() const override { return "one_hot"; }
  bool zero_derivative() const override { return true; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in[0].dtype == DType::Int64, "one_hot: labels must be int64, got {} (shape {})",
                in[0].dtype, in[0].shape);
    Shape s = in[0].shape;
    s.push_back(classes_);
    return {TensorMeta::contiguous(std::move(s), dtype_, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const auto labels = read_indices(in[0]);
    for (auto k : labels)
      REMAT_CHECK(k >= 0 && k < classes_,
                  "one_hot: label {} out of range for {} classes (labels shape {})", k, classes_,
                  in[0].meta->shape);
    detail::visit_dtype(dtype_, [&]<class T>() {
      T* y = out[0].data<T>();
      std::fill_n(y, out[0].meta->numel(), T(0));
      for (std::size_t i = 0; i < labels.size(); ++i)
        y[static_cast<std::int64_t>(i) * classes_ + labels[i]] = T(1);
    });
  }

 private:
  std::int64_t classes_;
  DType dtype_;
};

}  // namespace

Tensor gather(const Tensor& t, std::int64_t dim, const Tensor& index) {
  return call1(std::make_shared<GatherOp>(wrap_dim("gather", dim, t.dim())), {t, index});
}

Tensor scatter_add(const Tensor& t, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return call1(std::make_shared<ScatterAddOp>(wrap_dim("scatter_add", dim, t.dim())),
               {t, index, src});
}

Tensor index_select(const Tensor& t, std::int64_t dim, const Tensor& index) {
  REMAT_CHECK(t.dim() > 0, "index_select: cannot index a 0-dim tensor");
  return call1(std::make_shared<IndexSelectOp>(wrap_dim("index_select", dim, t.dim())), {t, index});
}

Tensor index_add(const Tensor& t, std::int64_t dim, const Tensor& index, const Tensor& src) {
  REMAT_CHECK(t.dim() > 0, "index_add: cannot index a 0-dim tensor");
  return call1(std::make_shared<IndexAddOp>(wrap_dim("index_add", dim, t.dim())),
               {t, index, contiguous(src)});
}

Tensor one_hot(const Tensor& labels, std::int64_t num_classes, DType dtype) {
  REMAT_CHECK(labels.dtype() == DType::Int64, "one_hot: labels must be int64, got {} (shape {})",
              labels.dtype(), labels.shape());
  if (num_classes < 0) {
    REMAT_CHECK(labels.numel() > 0,
                "one_hot: cannot infer the number of classes from empty labels of shape {}",
                labels.shape());
    const auto lowest = min(labels).item<std::int64_t>();
    REMAT_CHECK(lowest >= 0, "one_hot: label {} is negative (labels shape {})", lowest,
                labels.shape());
    num_classes = max(labels).item<std::int64_t>() + 1;
  }
  return call1(std::make_shared<OneHotOp>(num_classes, dtype), {labels});
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  return call1(std::make_shared<EmbeddingOp>(), {weight, indices});
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::int64_t padding_idx) {
  REMAT_CHECK(weight.defined() && weight.dim() == 2, "embedding: weight must be 2-D");
  const std::int64_t rows = weight.size(0);
  REMAT_CHECK(padding_idx >= -rows && padding_idx < rows,
              "embedding: padding_idx {} out of range for {} rows", padding_idx, rows);
  const std::int64_t pad = padding_idx < 0 ? padding_idx + rows : padding_idx;
  Tensor looked_up = embedding(weight, indices);
  if (!weight.requires_grad()) return looked_up;
  // Same values everywhere; the padding positions read a detached copy of the table.
  Tensor keep = unsqueeze(ne(indices, static_cast<double>(pad)), -1);
  return where(keep, looked_up, embedding(detach(weight), indices));
}

namespace {
// column - row over the last two dims, compared with the diagonal, as a mask in t's dtype.
Tensor triangle(std::string_view op, const Tensor& t, std::int64_t diagonal, bool upper) {
  REMAT_CHECK(t.defined() && t.dim() >= 2, "{}: expected a tensor of at least 2 dims, got {}", op,
              t.defined() ? t.shape() : Shape{});
  const std::int64_t rows = t.shape()[t.dim() - 2], cols = t.shape()[t.dim() - 1];
  const TensorOptions o{.dtype = t.dtype(), .device = t.device()};
  Tensor offset = sub(reshape(arange(0, static_cast<double>(cols), 1, o), {1, cols}),
                      reshape(arange(0, static_cast<double>(rows), 1, o), {rows, 1}));
  Tensor keep =
      upper ? ge(offset, static_cast<double>(diagonal)) : le(offset, static_cast<double>(diagonal));
  return where(keep, t, zeros_like(t));
}
}  // namespace

Tensor triu(const Tensor& t, std::int64_t diagonal) {
  return triangle("triu", t, diagonal, true);
}
Tensor tril(const Tensor& t, std::int64_t diagonal) {
  return triangle("tril", t, diagonal, false);
}

}  // namespace remat
