// Internal: the kinds of the element-wise ops and the arithmetic of the binary ones, shared by the
// CPU kernels (ops/elementwise.cpp) and the CUDA kernels (ops/cuda/elementwise.cu), so both devices
// follow one definition (PyTorch's semantics: NaN propagates through maximum/minimum, floor_divide
// and remainder round toward minus infinity).  Plain C++17 that nvcc also compiles.
#pragma once
#include <cmath>
#include <cstddef>
#include <type_traits>

#ifdef __CUDACC__
#define REMAT_HD __host__ __device__
#else
#define REMAT_HD
#endif

namespace remat::detail {

// ReluGrad is ReLU's backward from its output, a * (b > 0), in one pass and without a mask
// tensor (PyTorch's threshold_backward).
// FloorDiv and Rem round toward minus infinity, so the remainder takes the divisor's sign
// (Python's and PyTorch's floor_divide and remainder).
enum class Binary {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Max,
  Min,
  ReluGrad,
  FloorDiv,
  Rem,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Count
};

// The unary kinds; LeakyRelu, Clamp, PowScalar, Softplus and Elu take attributes p (and q).
enum class Unary {
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Abs,
  Sign,
  Tanh,
  Sigmoid,
  Relu,
  LeakyRelu,
  Gelu,
  Erf,
  Clamp,
  PowScalar,
  Sin,
  Cos,
  Log1p,
  Expm1,
  Silu,
  GeluTanh,
  Softplus,  // p = beta, q = threshold
  Elu,       // p = alpha
  Count
};

// The in-place kinds (add_, mul_, ...): self op= value or other operands, value a scalar
// attribute (add_'s alpha, addcmul_'s value, fill_'s value).
enum class Inplace { AddScaled, AddScalar, Mul, MulScalar, Div, Addcmul, Addcdiv, Fill, Copy };

template <class T>
REMAT_HD T floor_div_value(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // b != 0: the public functions check integer divisors.  a / -1 wraps for the most negative
    // a instead of trapping, as NumPy's.
    if (b == T(-1)) return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(a));
    const T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? static_cast<T>(q - 1) : q;
  } else {
    if (b == T(0)) return a / b;
    const T mod = std::fmod(a, b);
    T q = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) q -= T(1);
    if (q == T(0)) return std::copysign(T(0), a / b);
    const T f = std::floor(q);
    return q - f > T(0.5) ? f + T(1) : f;
  }
}
template <class T>
REMAT_HD T remainder_value(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == T(-1)) return T(0);
    const T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(r + b) : r;
  } else {
    const T r = std::fmod(a, b);
    return (r != T(0) && ((b < T(0)) != (r < T(0)))) ? r + b : r;
  }
}

template <class T>
REMAT_HD T apply_binary(Binary k, T a, T b) {
  switch (k) {
    case Binary::Add:
      return a + b;
    case Binary::Sub:
      return a - b;
    case Binary::Mul:
      return a * b;
    case Binary::Div:
      return a / b;
    case Binary::Pow:
      return static_cast<T>(std::pow(a, b));
    case Binary::Max:
      return a != a || a > b ? a : b;
    case Binary::Min:
      return a != a || a < b ? a : b;
    case Binary::ReluGrad:
      return b > T(0) ? a : T(0);
    case Binary::FloorDiv:
      return floor_div_value(a, b);
    case Binary::Rem:
      return remainder_value(a, b);
    case Binary::Eq:
      return a == b;
    case Binary::Ne:
      return a != b;
    case Binary::Lt:
      return a < b;
    case Binary::Le:
      return a <= b;
    case Binary::Gt:
      return a > b;
    case Binary::Ge:
      return a >= b;
    case Binary::Count:
      break;
  }
  return T{};
}

}  // namespace remat::detail
