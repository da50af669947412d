#include "ops/join.h"

#include <algorithm>

#include "ops/cpu/loops.h"
#include "ops/op.h"
#include "ops/view.h"

namespace remat {
namespace {

std::vector<Shape> shapes_of(const std::vector<Tensor>& tensors) {
  std::vector<Shape> s;
  s.reserve(tensors.size());
  for (const auto& t : tensors) s.push_back(t.shape());
  return s;
}

// One op for any number of inputs, so the record (and the autograd node) holds them all.
class CatOp final : public Op {
 public:
  explicit CatOp(std::int64_t dim) : dim_(dim) {}
  std::string_view name() const override { return "cat"; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(!in.empty(), "cat: expected a non-empty list of tensors");
    const TensorMeta& first = in[0];
    REMAT_CHECK(dim_ >= 0 && dim_ < first.dim(), "cat: dim {} out of range for shape {}", dim_,
                first.shape);
    Shape out = first.shape;
    out[dim_] = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      REMAT_CHECK(in[i].dtype == first.dtype,
                  "cat: tensor {} has dtype {} (shape {}), tensor 0 has {} (shape {})", i,
                  in[i].dtype, in[i].shape, first.dtype, first.shape);
      bool match = in[i].dim() == first.dim();
      for (std::int64_t d = 0; match && d < first.dim(); ++d)
        match = d == dim_ || in[i].shape[d] == first.shape[d];
      REMAT_CHECK(
          match, "cat: shapes must match except in dim {}; tensor {} has shape {}, tensor 0 has {}",
          dim_, i, in[i].shape, first.shape);
      out[dim_] += in[i].shape[dim_];
    }
    return {TensorMeta::contiguous(std::move(out), first.dtype, first.device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::visit_dtype(out[0].meta->dtype, [&]<class T>() {
      TensorMeta window = *out[0].meta;
      for (const KernelArg& a : in) {
        window.shape[dim_] = a.meta->shape[dim_];
        detail::map_kernel<T, T>(KernelArg{&window, out[0].base}, {a}, [](T x) { return x; });
        window.offset += window.shape[dim_] * window.strides[dim_];
      }
    });
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    std::vector<Tensor> grads(c.input_metas.size());
    std::int64_t start = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const std::int64_t n = c.input_meta(i).shape[dim_];
      if (c.needs(i)) grads[i] = narrow(c.grad(0), dim_, start, n);
      start += n;
    }
    return grads;
  }

 private:
  std::int64_t dim_;
};

// Every index of `dim` as its own view of the input: one op with one output per index, whose
// derivative is one stack of the gradients.  (A select per index would give each its own
// full-size slice_backward: quadratic in the number of pieces for a sequence read step by step.)
class UnbindView final : public Op {
 public:
  explicit UnbindView(std::int64_t dim) : dim_(dim) {}
  std::string_view name() const override { return "unbind"; }
  bool is_view() const override { return true; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    TensorMeta piece = in[0];
    const std::int64_t n = piece.shape[dim_], stride = piece.strides[dim_];
    piece.shape.erase(piece.shape.begin() + dim_);
    piece.strides.erase(piece.strides.begin() + dim_);
    std::vector<TensorMeta> out;
    out.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i, piece.offset += stride) out.push_back(piece);
    return out;
  }
  void cpu(std::span<const KernelArg>, std::span<const KernelArg>) const override {}
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {stack(std::vector<Tensor>(c.grad_outputs.begin(), c.grad_outputs.end()), dim_)};
  }

 private:
  std::int64_t dim_;
};

// Consecutive pieces of `dim` as views of the input: one op with one output per piece, whose
// derivative is one cat of the gradients.  (A slice per piece would give each its own
// full-size slice_backward, summed by the engine: a self-attention's q, k, v from one
// projection paid three zero-filled copies of it and two additions.)
class SplitView final : public Op {
 public:
  SplitView(std::int64_t dim, std::vector<std::int64_t> sizes)
      : dim_(dim), sizes_(std::move(sizes)) {}
  std::string_view name() const override { return "split"; }
  bool is_view() const override { return true; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    TensorMeta piece = in[0];
    const std::int64_t stride = piece.strides[dim_];
    std::vector<TensorMeta> out;
    out.reserve(sizes_.size());
    for (const std::int64_t size : sizes_) {
      piece.shape[dim_] = size;
      out.push_back(piece);
      piece.offset += size * stride;
    }
    return out;
  }
  void cpu(std::span<const KernelArg>, std::span<const KernelArg>) const override {}
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {cat(std::vector<Tensor>(c.grad_outputs.begin(), c.grad_outputs.end()), dim_)};
  }

 private:
  std::int64_t dim_;
  std::vector<std::int64_t> sizes_;
};

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  REMAT_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i)
    REMAT_CHECK(tensors[i].defined(), "cat: tensor {} of {} is undefined", i, tensors.size());
  REMAT_CHECK(tensors[0].dim() > 0,
              "cat: zero-dimensional tensor (at position 0) cannot be concatenated");
  const auto d = wrap_dim("cat", dim, tensors[0].dim());
  for (std::size_t i = 1; i < tensors.size(); ++i)
    REMAT_CHECK(tensors[i].dim() == tensors[0].dim(),
                "cat: tensors must have the same rank; got shapes {}", shapes_of(tensors));
  return call1(std::make_shared<CatOp>(d), tensors);
}

Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim) {
  REMAT_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    REMAT_CHECK(tensors[i].defined(), "stack: tensor {} of {} is undefined", i, tensors.size());
    REMAT_CHECK(
        tensors[i].shape() == tensors[0].shape() && tensors[i].dtype() == tensors[0].dtype(),
        "stack: expects each tensor to be equal size and dtype, but got {} ({}) at entry 0 and {} "
        "({}) "
        "at entry {}",
        tensors[0].shape(), tensors[0].dtype(), tensors[i].shape(), tensors[i].dtype(), i);
  }
  const auto d = wrap_dim("stack", dim, tensors[0].dim() + 1);
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const auto& t : tensors) parts.push_back(unsqueeze(t, d));
  return call1(std::make_shared<CatOp>(d), std::move(parts));
}

std::vector<Tensor> split(const Tensor& t, std::int64_t split_size, std::int64_t dim) {
  REMAT_CHECK(t.dim() > 0, "split: cannot split a 0-dim tensor");
  const auto d = wrap_dim("split", dim, t.dim());
  const std::int64_t n = t.shape()[d];
  REMAT_CHECK(
      split_size > 0 || (split_size == 0 && n == 0),
      "split: split_size must be positive (0 only for an empty dim), got {} for dim {} of shape {}",
      split_size, d, t.shape());
  std::vector<std::int64_t> sizes;
  for (std::int64_t start = 0; start < n; start += split_size)
    sizes.push_back(std::min(split_size, n - start));
  if (sizes.empty()) sizes.push_back(0);
  return split(t, sizes, d);
}

std::vector<Tensor> split(const Tensor& t, const std::vector<std::int64_t>& sizes,
                          std::int64_t dim) {
  REMAT_CHECK(t.dim() > 0, "split: cannot split a 0-dim tensor");
  const auto d = wrap_dim("split", dim, t.dim());
  const std::int64_t n = t.shape()[d];
  std::int64_t total = 0;
  for (auto s : sizes) {
    REMAT_CHECK(s >= 0, "split: negative size {} in sizes {}", s, sizes);
    total += s;
  }
  REMAT_CHECK(total == n, "split: sizes {} sum to {}, but dim {} of shape {} has size {}", sizes,
              total, d, t.shape(), n);
  return call(std::make_shared<SplitView>(d, sizes), {t});
}

std::vector<Tensor> chunk(const Tensor& t, std::int64_t chunks, std::int64_t dim) {
  REMAT_CHECK(t.dim() > 0, "chunk: cannot chunk a 0-dim tensor");
  REMAT_CHECK(chunks > 0, "chunk: chunks must be positive, got {} for shape {}", chunks, t.shape());
  const auto d = wrap_dim("chunk", dim, t.dim());
  const std::int64_t n = t.shape()[d];
  // An empty dim gives `chunks` empty pieces, as torch.chunk does.
  if (n == 0) return split(t, std::vector<std::int64_t>(chunks, 0), d);
  return split(t, (n + chunks - 1) / chunks, d);
}

std::vector<Tensor> unbind(const Tensor& t, std::int64_t dim) {
  REMAT_CHECK(t.defined(), "unbind: the tensor is undefined");
  REMAT_CHECK(t.dim() > 0, "unbind: cannot unbind a 0-dim tensor");
  const auto d = wrap_dim("unbind", dim, t.dim());
  if (t.shape()[d] == 0) return {};
  return call(std::make_shared<UnbindView>(d), {t});
}

}  // namespace remat
