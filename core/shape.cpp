#include "core/shape.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace remat {

std::int64_t& Shape::at(std::size_t i) {
  REMAT_CHECK(i < size_, "shape index {} out of range for {} dims", i, size_);
  return data()[i];
}
const std::int64_t& Shape::at(std::size_t i) const {
  REMAT_CHECK(i < size_, "shape index {} out of range for {} dims", i, size_);
  return data()[i];
}

void Shape::grow(std::size_t n) {
  n = std::max<std::size_t>(n, kInline * 2);
  auto* fresh = new std::int64_t[n];
  std::copy(begin(), end(), fresh);
  delete[] heap_;
  heap_ = fresh;
  capacity_ = static_cast<std::uint32_t>(n);
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

bool shape_fits(const Shape& shape) {
  constexpr std::int64_t kLimit = std::numeric_limits<std::int64_t>::max() / 8;
  std::int64_t span = 1;
  for (auto d : shape) {
    if (d < 0) return false;
    const std::int64_t f = std::max<std::int64_t>(d, 1);
    if (span > kLimit / f) return false;
    span *= f;
  }
  return true;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    REMAT_CHECK(da == db || da == 1 || db == 1,
                "{}: shapes {} and {} cannot be broadcast together (dim {}: {} vs {})", op, a, b, i,
                da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::int64_t wrap_dim(std::string_view op, std::int64_t dim, std::int64_t ndim) {
  const std::int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  REMAT_CHECK(dim >= lo && dim <= hi,
              "{}: dim {} out of range for a {}-D tensor (expected [{}, {}])", op, dim, ndim, lo,
              hi);
  return dim < 0 ? dim + std::max<std::int64_t>(ndim, 1) : dim;
}

}  // namespace remat
