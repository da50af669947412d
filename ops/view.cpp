#include "ops/view.h"

#include <algorithm>
#include <numeric>

#include "autograd/meta.h"
#include "ops/cpu/loops.h"
#include "ops/factory.h"
#include "ops/op.h"
#if REMAT_WITH_CUDA
#include "ops/cuda/device_args.h"
#endif
#include "ops/reduce.h"

namespace remat {
namespace {

// Strides for viewing `m` with `shape`, or empty when the memory layout does not allow it
// (the algorithm of PyTorch's computeStride: split or merge runs of contiguous dims).
std::optional<Shape> view_strides(const TensorMeta& m, const Shape& shape) {
  if (m.numel() == 0 || m.dim() == 0) return contiguous_strides(shape);
  Shape out(shape.size());
  std::int64_t view_d = static_cast<std::int64_t>(shape.size()) - 1;
  std::int64_t chunk_base_stride = m.strides.empty() ? 1 : m.strides.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (std::int64_t d = m.dim() - 1; d >= 0; --d) {
    tensor_numel *= m.shape[d];
    if (d == 0 || (m.shape[d - 1] != 1 && m.strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = m.strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Shape infer_size(std::string_view op, Shape shape, std::int64_t numel, const Shape& from) {
  std::int64_t known = 1, infer_at = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      REMAT_CHECK(infer_at < 0, "{}: only one dimension can be -1, got shape {}", op, shape);
      infer_at = static_cast<std::int64_t>(i);
    } else {
      REMAT_CHECK(shape[i] >= 0, "{}: invalid dimension {} in shape {}", op, shape[i], shape);
      known *= shape[i];
    }
  }
  if (infer_at >= 0) {
    REMAT_CHECK(known != 0 && numel % known == 0,
                "{}: shape {} is invalid for input of shape {} ({} elements)", op, shape, from,
                numel);
    shape[infer_at] = numel / known;
  } else {
    REMAT_CHECK(known == numel, "{}: shape {} is invalid for input of shape {} ({} elements)", op,
                shape, from, numel);
  }
  return shape;
}

// A view: output metadata computed by a function of the input's; backward given separately.
class ViewOp : public Op {
 public:
  bool is_view() const override { return true; }
  void cpu(std::span<const KernelArg>, std::span<const KernelArg>) const override {}
};

class ReshapeView final : public ViewOp {
 public:
  explicit ReshapeView(Shape shape) : shape_(std::move(shape)) {}
  std::string_view name() const override { return "view"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    TensorMeta m = in[0];
    auto strides = view_strides(m, shape_);
    REMAT_CHECK(strides,
                "view: shape {} is not compatible with input of shape {} and strides {}; "
                "use reshape() (which copies) instead",
                shape_, m.shape, m.strides);
    m.shape = shape_;
    m.strides = *strides;
    return {m};
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {reshape(c.grad(0), c.input_meta(0).shape)};
  }

 private:
  Shape shape_;
};

class ExpandView final : public ViewOp {
 public:
  explicit ExpandView(Shape shape) : shape_(std::move(shape)) {}
  std::string_view name() const override { return "expand"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& m = in[0];
    REMAT_CHECK(shape_.size() >= m.shape.size(), "expand: cannot expand shape {} to fewer dims {}",
                m.shape, shape_);
    TensorMeta out = m;
    out.shape = shape_;
    out.strides.assign(shape_.size(), 0);
    const std::size_t lead = shape_.size() - m.shape.size();
    for (std::size_t i = 0; i < shape_.size(); ++i) {
      if (i < lead) {
        REMAT_CHECK(shape_[i] >= 0, "expand: invalid size {} in {}", shape_[i], shape_);
        continue;
      }
      const auto src = m.shape[i - lead];
      auto& dst = out.shape[i];
      if (dst == -1) dst = src;
      REMAT_CHECK(dst == src || src == 1, "expand: cannot expand shape {} to {} (dim {}: {} to {})",
                  m.shape, shape_, i, src, dst);
      out.strides[i] = dst == src ? m.strides[i - lead] : 0;
    }
    return {out};
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {sum_to(c.grad(0), c.input_meta(0).shape)};
  }

 private:
  Shape shape_;
};

class PermuteView final : public ViewOp {
 public:
  explicit PermuteView(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}
  std::string_view name() const override { return "permute"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& m = in[0];
    REMAT_CHECK(static_cast<std::int64_t>(dims_.size()) == m.dim(),
                "permute: got {} dims {} for a tensor of shape {}", dims_.size(), dims_, m.shape);
    std::vector<bool> seen(dims_.size());
    TensorMeta out = m;
    for (std::size_t i = 0; i < dims_.size(); ++i) {
      const auto d = wrap_dim("permute", dims_[i], m.dim());
      REMAT_CHECK(!seen[d], "permute: dim {} repeated in {}", d, dims_);
      seen[d] = true;
      out.shape[i] = m.shape[d];
      out.strides[i] = m.strides[d];
    }
    return {out};
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const auto n = static_cast<std::int64_t>(dims_.size());
    std::vector<std::int64_t> inverse(dims_.size());
    for (std::int64_t i = 0; i < n; ++i) inverse[wrap_dim("permute", dims_[i], n)] = i;
    return {permute(c.grad(0), inverse)};
  }

 private:
  std::vector<std::int64_t> dims_;
};

class SliceView final : public ViewOp {
 public:
  SliceView(std::int64_t dim, std::int64_t start, std::int64_t length, std::int64_t step)
      : dim_(dim), start_(start), length_(length), step_(step) {}
  std::string_view name() const override { return "slice"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    TensorMeta out = in[0];
    out.offset += start_ * out.strides[dim_];
    out.shape[dim_] = length_;
    out.strides[dim_] *= step_;
    return {out};
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override;
  std::int64_t dim_, start_, length_, step_;
};

// Gradient of a slice: the incoming gradient placed into zeros of the input's shape.
class SliceBackwardOp final : public Op {
 public:
  SliceBackwardOp(Shape input_shape, std::int64_t dim, std::int64_t start, std::int64_t length,
                  std::int64_t step)
      : shape_(std::move(input_shape)), dim_(dim), start_(start), length_(length), step_(step) {}
  std::string_view name() const override { return "slice_backward"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    return {TensorMeta::contiguous(shape_, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::visit_dtype(in[0].meta->dtype, [&]<class T>() {
      T* o = out[0].data<T>();
      std::fill(o, o + out[0].meta->numel(), T(0));
      TensorMeta window = *out[0].meta;
      window.offset = start_ * window.strides[dim_];
      window.shape[dim_] = length_;
      window.strides[dim_] *= step_;
      detail::map_kernel<T, T>(KernelArg{&window, out[0].base}, {in[0]}, [](T x) { return x; });
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    // The view itself, not slice(): for an empty window the end start - step + 1 can be
    // negative, which slice() would read as counting from the end.
    return {call1(std::make_shared<SliceView>(dim_, start_, length_, step_), {c.grad(0)})};
  }

 private:
  Shape shape_;
  std::int64_t dim_, start_, length_, step_;
};

std::vector<Tensor> SliceView::backward(const BackwardContext& c) const {
  return {
      call1(std::make_shared<SliceBackwardOp>(c.input_meta(0).shape, dim_, start_, length_, step_),
            {c.grad(0)})};
}

class CloneOp final : public Op {
 public:
  std::string_view name() const override { return "clone"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    return {TensorMeta::contiguous(in[0].shape, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::visit_dtype(in[0].meta->dtype, [&]<class T>() {
      detail::map_kernel<T, T>(out[0], {in[0]}, [](T x) { return x; });
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Shape& shape = out[0].meta->shape;
    const auto t = detail::scalar_of(in[0].meta->dtype);
    detail::cuda_launch::copy(t, t, detail::extent_of(shape), detail::operand_of(out[0], shape),
                              detail::operand_of(in[0], shape));
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {c.grad(0)};
  }
};

}  // namespace

Tensor view(const Tensor& t, Shape shape) {
  shape = infer_size("view", std::move(shape), t.numel(), t.shape());
  if (shape == t.shape()) return t;
  return call1(std::make_shared<ReshapeView>(std::move(shape)), {t});
}

Tensor reshape(const Tensor& t, Shape shape) {
  shape = infer_size("reshape", std::move(shape), t.numel(), t.shape());
  if (shape == t.shape()) return t;
  if (view_strides(t.meta(), shape))
    return call1(std::make_shared<ReshapeView>(std::move(shape)), {t});
  return call1(std::make_shared<ReshapeView>(std::move(shape)), {clone(t)});
}

Tensor flatten(const Tensor& t, std::int64_t start_dim, std::int64_t end_dim) {
  if (t.dim() == 0) return reshape(t, {1});
  const auto s = wrap_dim("flatten", start_dim, t.dim()), e = wrap_dim("flatten", end_dim, t.dim());
  REMAT_CHECK(s <= e, "flatten: start_dim {} is after end_dim {} for shape {}", start_dim, end_dim,
              t.shape());
  Shape shape(t.shape().begin(), t.shape().begin() + s);
  std::int64_t n = 1;
  for (auto d = s; d <= e; ++d) n *= t.shape()[d];
  shape.push_back(n);
  shape.insert(shape.end(), t.shape().begin() + e + 1, t.shape().end());
  return reshape(t, std::move(shape));
}

Tensor expand(const Tensor& t, Shape shape) {
  if (shape == t.shape()) return t;
  return call1(std::make_shared<ExpandView>(std::move(shape)), {t});
}
Tensor broadcast_to(const Tensor& t, const Shape& shape) {
  return expand(t, shape);
}

Tensor permute(const Tensor& t, std::vector<std::int64_t> dims) {
  return call1(std::make_shared<PermuteView>(std::move(dims)), {t});
}

Tensor transpose(const Tensor& t, std::int64_t dim0, std::int64_t dim1) {
  const auto a = wrap_dim("transpose", dim0, t.dim()), b = wrap_dim("transpose", dim1, t.dim());
  if (a == b) return t;
  std::vector<std::int64_t> dims(t.dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[a], dims[b]);
  return permute(t, std::move(dims));
}

Tensor squeeze(const Tensor& t) {
  Shape shape;
  for (auto d : t.shape())
    if (d != 1) shape.push_back(d);
  return reshape(t, std::move(shape));
}

Tensor squeeze(const Tensor& t, std::int64_t dim) {
  const auto d = wrap_dim("squeeze", dim, t.dim());
  if (t.dim() == 0 || t.shape()[d] != 1) return t;
  Shape shape = t.shape();
  shape.erase(shape.begin() + d);
  return reshape(t, std::move(shape));
}

Tensor unsqueeze(const Tensor& t, std::int64_t dim) {
  const auto d = wrap_dim("unsqueeze", dim, t.dim() + 1);
  Shape shape = t.shape();
  shape.insert(shape.begin() + d, 1);
  return reshape(t, std::move(shape));
}

Tensor slice(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t end,
             std::int64_t step) {
  REMAT_CHECK(t.dim() > 0, "slice: cannot slice a 0-dim tensor");
  const auto d = wrap_dim("slice", dim, t.dim());
  REMAT_CHECK(step > 0, "slice: step must be positive, got {}", step);
  const std::int64_t n = t.shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  const std::int64_t length = (end - start + step - 1) / step;
  if (start == 0 && length == n && step == 1) return t;
  return call1(std::make_shared<SliceView>(d, start, length, step), {t});
}

Tensor narrow(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t length) {
  const auto d = wrap_dim("narrow", dim, t.dim());
  const std::int64_t n = t.shape()[d];
  if (start < 0) start += n;
  REMAT_CHECK(start >= 0 && length >= 0 && start + length <= n,
              "narrow: start {} and length {} out of range for dim {} of shape {}", start, length,
              d, t.shape());
  return slice(t, d, start, start + length);
}

Tensor select(const Tensor& t, std::int64_t dim, std::int64_t index) {
  const auto d = wrap_dim("select", dim, t.dim());
  const std::int64_t n = t.shape()[d];
  REMAT_CHECK(index >= -n && index < n, "select: index {} out of range for dim {} of shape {}",
              index, d, t.shape());
  if (index < 0) index += n;
  return squeeze(slice(t, d, index, index + 1), d);
}

Tensor contiguous(const Tensor& t) {
  return t.is_contiguous() ? t : clone(t);
}

Tensor clone(const Tensor& t) {
  static const auto op = std::make_shared<CloneOp>();
  return call1(op, {t});
}

Tensor detach(const Tensor& t) {
  return alias_without_history(t);
}

}  // namespace remat
