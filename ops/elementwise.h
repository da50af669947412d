// Element-wise ops with NumPy/PyTorch broadcasting.  Binary ops need equal dtypes (a scalar
// takes the tensor's dtype).  Comparisons return 0/1 in the inputs' dtype, so a mask multiplies
// directly: x * gt(x, 0).  Usage: auto y = relu(add(mul(x, w), b));  or  x * w + b.
#pragma once
#include <optional>
#include <string_view>

#include "core/tensor.h"

namespace remat {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integer inputs give float32
// Rounded toward minus infinity; the remainder has the divisor's sign (Python, PyTorch).
// Integer division by zero is an error.  floor_divide has no derivative (as in PyTorch).
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, double b);
Tensor remainder(const Tensor& a, double b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);
Tensor rsub(double a, const Tensor& b);  // a - b
Tensor rdiv(double a, const Tensor& b);  // a / b

Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor sign(const Tensor& a);  // no gradient (zero almost everywhere)
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);  // NaN stays NaN
// ReLU's gradient from its output: grad where output > 0, else 0 (PyTorch's threshold_backward).
Tensor relu_backward(const Tensor& grad, const Tensor& output);
Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);
Tensor gelu(const Tensor& a);  // exact form, x * Phi(x), as PyTorch's default
// approximate: "none" (the exact form) or "tanh", as torch.nn.functional.gelu.
Tensor gelu(const Tensor& a, std::string_view approximate);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor log1p(const Tensor& a);
Tensor expm1(const Tensor& a);
Tensor silu(const Tensor& a);  // x * sigmoid(x)
// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (PyTorch's defaults).
Tensor softplus(const Tensor& a, double beta = 1.0, double threshold = 20.0);
Tensor elu(const Tensor& a, double alpha = 1.0);
// a where mask is zero, value where it is not (mask broadcasts to a's shape).
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);
Tensor erf(const Tensor& a);
// min(max(a, min), max) as PyTorch: with min > max every element is max; NaN stays NaN.
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max);

// Comparisons: 1 where true, 0 elsewhere, in the inputs' dtype.  Not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

// a where cond is non-zero, b elsewhere; all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// Element type conversion (differentiable between floating types).
Tensor to_dtype(const Tensor& a, DType dtype);

inline Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
inline Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
inline Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
inline Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
inline Tensor operator+(const Tensor& a, double b) {
  return add(a, b);
}
inline Tensor operator-(const Tensor& a, double b) {
  return sub(a, b);
}
inline Tensor operator*(const Tensor& a, double b) {
  return mul(a, b);
}
inline Tensor operator/(const Tensor& a, double b) {
  return div(a, b);
}
inline Tensor operator+(double a, const Tensor& b) {
  return add(b, a);
}
inline Tensor operator-(double a, const Tensor& b) {
  return rsub(a, b);
}
inline Tensor operator*(double a, const Tensor& b) {
  return mul(b, a);
}
inline Tensor operator/(double a, const Tensor& b) {
  return rdiv(a, b);
}
inline Tensor operator-(const Tensor& a) {
  return neg(a);
}

}  // namespace remat
