// PyTorch-style printing: tensor([[1.0000, 2.5000], ...], dtype=torch.float64).  Tensors with
// more than 1000 elements are summarised with the first and last three entries of each dim.
#include <cmath>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace remat {
namespace {

constexpr std::int64_t kSummaryThreshold = 1000;
constexpr std::int64_t kEdgeItems = 3;

struct Formatter {
  bool integer_dtype = false;
  bool integral_values = true;
  bool scientific = false;
  std::size_t width = 1;

  std::string format(double v) const {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (integer_dtype) return fmt::format("{}", static_cast<std::int64_t>(v));
    if (scientific) return fmt::format("{:.4e}", v);
    if (integral_values) return fmt::format("{:.0f}.", v);
    return fmt::format("{:.4f}", v);
  }
};

// Indices kept along a dim of size n: all, or the edges when summarising.
std::vector<std::int64_t> kept(std::int64_t n, bool summarise) {
  std::vector<std::int64_t> idx;
  if (!summarise || n <= 2 * kEdgeItems) {
    for (std::int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (std::int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);  // the ellipsis
    for (std::int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

void render(std::string& out, const std::vector<double>& values, const Shape& shape,
            const Shape& strides, std::size_t dim, std::int64_t offset, const Formatter& f,
            bool summarise, std::size_t indent) {
  out += '[';
  const auto idx = kept(shape[dim], summarise);
  const bool last = dim + 1 == shape.size();
  for (std::size_t k = 0; k < idx.size(); ++k) {
    if (k > 0) {
      out += ',';
      if (last) {
        out += ' ';
      } else {
        out.append(shape.size() - dim - 1, '\n');
        out.append(indent + dim + 1, ' ');
      }
    }
    if (idx[k] < 0) {
      out += last ? " ..." : "...";
      continue;
    }
    const std::int64_t off = offset + idx[k] * strides[dim];
    if (last) {
      std::string s = f.format(values[off]);
      if (s.size() < f.width) out.append(f.width - s.size(), ' ');
      out += s;
    } else {
      render(out, values, shape, strides, dim + 1, off, f, summarise, indent);
    }
  }
  out += ']';
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const auto values = to_vector<double>();
  const bool summarise = numel() > kSummaryThreshold;
  Formatter f;
  f.integer_dtype = dtype() == DType::Int64;
  double max_abs = 0, min_abs = INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    if (v != std::floor(v)) f.integral_values = false;
    max_abs = std::max(max_abs, std::abs(v));
    if (v != 0) min_abs = std::min(min_abs, std::abs(v));
  }
  if (!f.integer_dtype)
    f.scientific = max_abs >= 1e8 || (!f.integral_values && min_abs < 1e-4) ||
                   (max_abs > 0 && max_abs / min_abs > 1000 && !f.integral_values);
  for (double v : values) f.width = std::max(f.width, f.format(v).size());

  std::string body;
  const std::string prefix = "tensor(";
  if (dim() == 0) {
    body = f.format(values.at(0));
  } else {
    render(body, values, shape(), contiguous_strides(shape()), 0, 0, f, summarise, prefix.size());
  }
  std::string suffix;
  if (numel() == 0 && dim() > 1) suffix += fmt::format(", size={}", shape());
  if (dtype() == DType::Float64) suffix += ", dtype=torch.float64";
  if (requires_grad()) suffix += is_leaf() ? ", requires_grad=True" : ", grad_fn=<...>";
  return prefix + body + suffix + ")";
}

}  // namespace remat
