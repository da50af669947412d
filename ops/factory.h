// Tensor factories.  Filled and random tensors are zero-input op calls (a random op's record
// holds its RNG key, so a replay redraws the same numbers); data from the user is a constant.
// Usage: auto w = randn({784, 10}, {.seed = 7}); auto x = tensor<float>({1, 2, 3, 4}, {2, 2});
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace remat {

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool requires_grad = false;
};

struct RandomOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool requires_grad = false;
  // Without a seed the next key of the default generator (manual_seed) is used.
  std::optional<std::uint64_t> seed = std::nullopt;
};

Tensor full(const Shape& shape, double value, TensorOptions opts = {});
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// A 0-dim tensor holding `value`.
Tensor scalar_tensor(double value, TensorOptions opts = {});
// [start, end) in steps of `step`; int64 unless opts say otherwise.
Tensor arange(double start, double end, double step = 1,
              TensorOptions opts = {.dtype = DType::Int64});
inline Tensor arange(double end, TensorOptions opts = {.dtype = DType::Int64}) {
  return arange(0, end, 1, opts);
}
// Uniform in [low, high) and standard normal, from the counter-based generator.
Tensor rand(const Shape& shape, RandomOptions opts = {});
Tensor uniform(const Shape& shape, double low, double high, RandomOptions opts = {});
Tensor randn(const Shape& shape, RandomOptions opts = {});
Tensor normal(const Shape& shape, double mean, double std, RandomOptions opts = {});
// Random integers in [low, high), int64.
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, RandomOptions opts = {});

// A constant tensor holding `values` (row-major) with the given shape (default: 1-D; pass
// Shape{} for a 0-dim tensor of one value).
template <class T>
Tensor tensor(const std::vector<T>& values, std::optional<Shape> shape = std::nullopt,
              bool requires_grad = false);

}  // namespace remat
