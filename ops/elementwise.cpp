#include "ops/elementwise.h"

#include <array>
#include <cmath>
#include <type_traits>

#include "ops/cpu/loops.h"
#include "ops/cpu/vec_math.h"
#include "ops/elementwise_math.h"
#if REMAT_WITH_CUDA
#include "ops/cuda/device_args.h"
#endif
#include "ops/factory.h"
#include "ops/op.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace remat {
namespace {

using detail::map_kernel;
using detail::visit_dtype;

TensorMeta broadcast_meta(std::string_view op, std::span<const TensorMeta> in,
                          bool same_dtype = true) {
  Shape shape = in[0].shape;
  for (std::size_t i = 1; i < in.size(); ++i) {
    if (same_dtype)
      REMAT_CHECK(in[i].dtype == in[0].dtype, "{}: dtype mismatch, {} (shape {}) vs {} (shape {})",
                  op, in[0].dtype, in[0].shape, in[i].dtype, in[i].shape);
    shape = broadcast_shapes(op, shape, in[i].shape);
  }
  return TensorMeta::contiguous(std::move(shape), in[same_dtype ? 0 : in.size() - 1].dtype,
                                in[0].device);
}

// ---------------------------------------------------------------- binary ops
// The kinds and their arithmetic are in ops/elementwise_math.h, shared with the CUDA kernels.
using detail::apply_binary;
using detail::Binary;
using detail::Unary;
constexpr std::size_t kBinaryKinds = static_cast<std::size_t>(Binary::Count);

// One name per kind, checked against the enum at compile time.
constexpr auto kBinaryNames = std::to_array<std::string_view>(
    {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "relu_backward", "floor_divide",
     "remainder", "eq", "ne", "lt", "le", "gt", "ge"});
static_assert(kBinaryNames.size() == kBinaryKinds, "one name per Binary kind");
constexpr std::string_view binary_name(Binary k) {
  return kBinaryNames[static_cast<std::size_t>(k)];
}
constexpr bool is_comparison(Binary k) {
  return k >= Binary::Eq;
}

Tensor binary(Binary k, const Tensor& a, const Tensor& b);

class BinaryOp final : public Op {
 public:
  explicit BinaryOp(Binary kind) : kind_(kind) {}
  std::string_view name() const override { return binary_name(kind_); }
  // floor_divide has no derivative, as in PyTorch: differentiating through it is an error.
  bool zero_derivative() const override { return is_comparison(kind_); }
  SaveSpec saves() const override {
    switch (kind_) {
      case Binary::Mul:
      case Binary::Max:
      case Binary::Min:
        return {0b11, 0};
      case Binary::Div:
        return {0b11, 0};
      case Binary::Rem:
        return {0b11, 0};
      case Binary::Pow:
        return {0b11, 0b1};
      case Binary::ReluGrad:
        return {0b10, 0};
      default:
        return {};
    }
  }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 2, "{}: expected 2 inputs, got {}", name(), in.size());
    REMAT_CHECK(kind_ != Binary::Pow || is_floating(in[0].dtype),
                "pow: expected floating-point inputs, got {}", in[0].dtype);
    return {broadcast_meta(name(), in)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    visit_dtype(in[0].meta->dtype, [&]<class T>() {
      // clang-format off
      switch (kind_) {  // one instantiation per kind keeps the inner loop branch-free
#define REMAT_CASE(K)                                                                          \
  case Binary::K:                                                                              \
    map_kernel<T, T, T>(out[0], {in[0], in[1]}, [](T a, T b) { return apply_binary<T>(Binary::K, a, b); }); \
    break;
        REMAT_CASE(Add) REMAT_CASE(Sub) REMAT_CASE(Mul) REMAT_CASE(Div) REMAT_CASE(Pow) REMAT_CASE(Max)
        REMAT_CASE(Min) REMAT_CASE(ReluGrad) REMAT_CASE(FloorDiv) REMAT_CASE(Rem)
        REMAT_CASE(Eq) REMAT_CASE(Ne) REMAT_CASE(Lt) REMAT_CASE(Le) REMAT_CASE(Gt) REMAT_CASE(Ge)
#undef REMAT_CASE
        case Binary::Count: break;
      }
      // clang-format on
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Shape& shape = out[0].meta->shape;
    detail::cuda_launch::binary(static_cast<int>(kind_), detail::scalar_of(in[0].meta->dtype),
                                detail::extent_of(shape), detail::operand_of(out[0], shape),
                                detail::operand_of(in[0], shape), detail::operand_of(in[1], shape));
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    const Tensor *a = &c.input(0), *b = &c.input(1);  // undefined unless saved
    Tensor ga, gb;
    switch (kind_) {
      case Binary::Add:
        ga = g, gb = g;
        break;
      case Binary::Sub:
        ga = g, gb = c.needs(1) ? neg(g) : Tensor();
        break;
      case Binary::Mul:
        if (c.needs(0)) ga = mul(g, *b);
        if (c.needs(1)) gb = mul(g, *a);
        break;
      case Binary::Div:
        if (c.needs(0)) ga = div(g, *b);
        if (c.needs(1)) gb = neg(div(mul(g, *a), mul(*b, *b)));
        break;
      case Binary::Pow:
        // d/da = b a^(b-1), defined as 0 where b == 0 (a^0 is constant, also at a = 0).
        if (c.needs(0))
          ga = mul(g, where(eq(*b, 0.0), zeros_like(*b), mul(*b, pow(*a, sub(*b, 1.0)))));
        // d/db = a^b log a, defined as 0 where a == 0 and b >= 0 (a^b is 0 or 1 there); for
        // b < 0 it stays inf * -inf = -inf, as in PyTorch.
        if (c.needs(1))
          gb = mul(g, where(mul(eq(*a, 0.0), ge(*b, 0.0)), zeros_like(c.output(0)),
                            mul(c.output(0), log(*a))));
        break;
      case Binary::FloorDiv:  // as in PyTorch, where its derivative "is not implemented"
        REMAT_THROW(
            "op floor_divide has no derivative; use div, or floor_divide on detached tensors");
      case Binary::Rem:  // a - floor(a / b) b; the quotient is piecewise constant
        if (c.needs(0)) ga = g;
        if (c.needs(1)) gb = neg(mul(g, floor_divide(detach(*a), detach(*b))));
        break;
      case Binary::Max:
      case Binary::Min: {
        // Ties share the gradient equally, as PyTorch does.
        Tensor win = kind_ == Binary::Max ? gt(*a, *b) : lt(*a, *b);
        Tensor share = add(win, mul(eq(*a, *b), 0.5));
        if (c.needs(0)) ga = mul(g, share);
        if (c.needs(1)) gb = mul(g, rsub(1.0, share));
        break;
      }
      // Linear in a; the mask is piecewise constant in b, whose gradient is zero.
      case Binary::ReluGrad:
        ga = binary(Binary::ReluGrad, g, *b);
        break;
      default:
        break;
    }
    if (ga.defined() && c.needs(0)) ga = sum_to(ga, c.input_meta(0).shape);
    if (gb.defined() && c.needs(1)) gb = sum_to(gb, c.input_meta(1).shape);
    return {c.needs(0) ? ga : Tensor(), c.needs(1) ? gb : Tensor()};
  }

 private:
  Binary kind_;
};

// One shared Op per kind of a family, built from the enum itself, so no kind can be missing.
template <class OpT, class Kind, std::size_t N>
const std::shared_ptr<const Op>& op_of(Kind k) {
  static const auto table = [] {
    std::array<std::shared_ptr<const Op>, N> t;
    for (std::size_t i = 0; i < N; ++i) t[i] = std::make_shared<OpT>(static_cast<Kind>(i));
    return t;
  }();
  return table[static_cast<std::size_t>(k)];
}

Tensor binary(Binary k, const Tensor& a, const Tensor& b) {
  return call1(op_of<BinaryOp, Binary, kBinaryKinds>(k), {a, b});
}

Tensor scalar_like(const Tensor& a, double v) {
  REMAT_CHECK(a.defined(), "scalar operand: the tensor is undefined");
  return scalar_tensor(v, {a.dtype(), a.device()});
}

// ---------------------------------------------------------------- unary ops
// LeakyRelu, Clamp and PowScalar carry attributes: their Ops are made per call.
constexpr std::size_t kUnaryKinds = static_cast<std::size_t>(Unary::Count);

constexpr auto kUnaryNames = std::to_array<std::string_view>(
    {"neg",     "exp",   "log",        "sqrt", "rsqrt",     "abs",      "sign", "tanh",
     "sigmoid", "relu",  "leaky_relu", "gelu", "erf",       "clamp",    "pow",  "sin",
     "cos",     "log1p", "expm1",      "silu", "gelu_tanh", "softplus", "elu"});
static_assert(kUnaryNames.size() == kUnaryKinds, "one name per Unary kind");
constexpr std::string_view unary_name(Unary k) {
  return kUnaryNames[static_cast<std::size_t>(k)];
}

class UnaryOp final : public Op {
 public:
  UnaryOp(Unary kind, double p = 0, double q = 0, bool has_p = true, bool has_q = true)
      : kind_(kind), p_(p), q_(q), has_p_(has_p), has_q_(has_q) {}
  std::string_view name() const override { return unary_name(kind_); }
  bool zero_derivative() const override { return kind_ == Unary::Sign; }
  SaveSpec saves() const override {
    switch (kind_) {
      // ReLU keeps its output, as PyTorch does: the mask is the same (y > 0 exactly where x > 0)
      // and the output is usually saved anyway as the next layer's input.
      case Unary::Exp:
      case Unary::Sqrt:
      case Unary::Rsqrt:
      case Unary::Tanh:
      case Unary::Sigmoid:
      case Unary::Relu:
      case Unary::Expm1:
        return {0, 1};
      case Unary::Neg:
      case Unary::Sign:
        return {};
      default:
        return {1, 0};
    }
  }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 1, "{}: expected 1 input, got {}", name(), in.size());
    const bool int_ok = kind_ == Unary::Neg || kind_ == Unary::Abs || kind_ == Unary::Sign ||
                        kind_ == Unary::Relu || kind_ == Unary::Clamp;
    REMAT_CHECK(int_ok || is_floating(in[0].dtype),
                "{}: expected a floating-point tensor, got {} of shape {}", name(), in[0].dtype,
                in[0].shape);
    return {TensorMeta::contiguous(in[0].shape, in[0].dtype, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    visit_dtype(in[0].meta->dtype, [&]<class T>() {
      const T p = static_cast<T>(p_), q = static_cast<T>(q_);
      auto run = [&](auto f) { map_kernel<T, T>(out[0], {in[0]}, f); };
      switch (kind_) {
        case Unary::Neg:
          run([](T x) { return static_cast<T>(-x); });
          break;
        case Unary::Exp:
          run([](T x) { return detail::vexp(x); });
          break;
        case Unary::Log:
          run([](T x) { return detail::vlog(x); });
          break;
        case Unary::Sqrt:
          run([](T x) { return static_cast<T>(std::sqrt(x)); });
          break;
        case Unary::Rsqrt:
          run([](T x) { return static_cast<T>(T(1) / std::sqrt(x)); });
          break;
        case Unary::Abs:
          run([](T x) { return x < 0 ? static_cast<T>(-x) : x; });
          break;
        case Unary::Sign:
          run([](T x) { return static_cast<T>((T(0) < x) - (x < T(0))); });
          break;
        case Unary::Tanh:
          run([](T x) { return detail::vtanh(x); });
          break;
        case Unary::Sigmoid:
          run([](T x) { return detail::vsigmoid(x); });
          break;
        // x != x: NaN propagates, as through every other activation.  `|` rather than `||`:
        // without the branch the loop vectorises.
        case Unary::Relu:
          run([](T x) { return (x > T(0)) | (x != x) ? x : T(0); });
          break;
        case Unary::LeakyRelu:
          run([p](T x) { return x > 0 ? x : static_cast<T>(x * p); });
          break;
        case Unary::Gelu:
          run([](T x) { return static_cast<T>(0.5 * x * (1.0 + std::erf(x * M_SQRT1_2))); });
          break;
        case Unary::Erf:
          run([](T x) { return static_cast<T>(std::erf(x)); });
          break;
        case Unary::Clamp: {
          const bool hp = has_p_, hq = has_q_;
          // min(max(x, p), q), as PyTorch: with p > q every element is q; NaN stays NaN.
          run([=](T x) {
            const T y = hp && x < p ? p : x;
            return hq && y > q ? q : y;
          });
          break;
        }
        case Unary::PowScalar:
          run([p](T x) { return static_cast<T>(std::pow(x, p)); });
          break;
        case Unary::Sin:
          run([](T x) { return static_cast<T>(std::sin(x)); });
          break;
        case Unary::Cos:
          run([](T x) { return static_cast<T>(std::cos(x)); });
          break;
        case Unary::Log1p:
          run([](T x) { return static_cast<T>(std::log1p(x)); });
          break;
        case Unary::Expm1:
          run([](T x) { return static_cast<T>(std::expm1(x)); });
          break;
        case Unary::Silu:
          run([](T x) { return static_cast<T>(x / (T(1) + detail::vexp(-x))); });
          break;
        case Unary::GeluTanh:  // PyTorch's approximate="tanh"
          run([](T x) {
            const T k = static_cast<T>(M_2_SQRTPI * M_SQRT1_2);
            return static_cast<T>(
                T(0.5) * x *
                (T(1) + detail::vtanh(static_cast<T>(k * (x + T(0.044715) * x * x * x)))));
          });
          break;
        case Unary::Softplus:  // linear above the threshold, as PyTorch
          run([p, q](T x) {
            return p * x > q ? x : static_cast<T>(std::log1p(std::exp(p * x)) / p);
          });
          break;
        case Unary::Elu:
          run([p](T x) { return x > 0 ? x : static_cast<T>(p * std::expm1(x)); });
          break;
        case Unary::Count:
          break;
      }
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Shape& shape = out[0].meta->shape;
    detail::cuda_launch::unary(static_cast<int>(kind_), detail::scalar_of(in[0].meta->dtype),
                               detail::extent_of(shape), detail::operand_of(out[0], shape),
                               detail::operand_of(in[0], shape), p_, q_, has_p_, has_q_);
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    switch (kind_) {
      case Unary::Neg:
        return {neg(g)};
      case Unary::Exp:
        return {mul(g, c.output(0))};
      case Unary::Log:
        return {div(g, c.input(0))};
      case Unary::Sqrt:
        return {div(g, mul(c.output(0), 2.0))};
      case Unary::Rsqrt:
        return {mul(g, mul(pow(c.output(0), 3.0), -0.5))};
      case Unary::Abs:
        return {mul(g, sign(c.input(0)))};
      case Unary::Tanh:
        return {mul(g, rsub(1.0, mul(c.output(0), c.output(0))))};
      case Unary::Sigmoid:
        return {mul(g, mul(c.output(0), rsub(1.0, c.output(0))))};
      case Unary::Relu:
        return {relu_backward(g, c.output(0))};
      case Unary::LeakyRelu: {
        Tensor pos = gt(c.input(0), 0.0);
        return {mul(g, add(mul(pos, 1.0 - p_), p_))};
      }
      case Unary::Gelu: {
        const Tensor& x = c.input(0);
        Tensor cdf = mul(add(erf(mul(x, M_SQRT1_2)), 1.0), 0.5);
        Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), 0.5 * M_2_SQRTPI * M_SQRT1_2);
        return {mul(g, add(cdf, mul(x, pdf)))};
      }
      case Unary::Erf: {
        const Tensor& x = c.input(0);
        return {mul(g, mul(exp(neg(mul(x, x))), M_2_SQRTPI))};
      }
      case Unary::Clamp: {
        const Tensor& x = c.input(0);
        Tensor mask = ones_like(x);
        if (has_p_) mask = mul(mask, ge(x, p_));
        if (has_q_) mask = mul(mask, le(x, q_));
        return {mul(g, mask)};
      }
      case Unary::PowScalar:
        if (p_ == 0) return {zeros_like(g)};
        return {mul(g, mul(pow(c.input(0), p_ - 1.0), p_))};
      case Unary::Sin:
        return {mul(g, cos(c.input(0)))};
      case Unary::Cos:
        return {neg(mul(g, sin(c.input(0))))};
      case Unary::Log1p:
        return {div(g, add(c.input(0), 1.0))};
      case Unary::Expm1:
        return {mul(g, add(c.output(0), 1.0))};
      case Unary::Silu: {  // s (1 + x (1 - s))
        const Tensor& x = c.input(0);
        Tensor s = sigmoid(x);
        return {mul(g, mul(s, add(mul(x, rsub(1.0, s)), 1.0)))};
      }
      case Unary::GeluTanh: {
        const Tensor& x = c.input(0);
        const double k = M_2_SQRTPI * M_SQRT1_2;
        Tensor x2 = mul(x, x);
        Tensor t = tanh(mul(mul(x, add(mul(x2, 0.044715), 1.0)), k));
        Tensor inner = mul(add(mul(x2, 3 * 0.044715), 1.0), k);  // d/dx of the tanh's argument
        Tensor d = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, rsub(1.0, mul(t, t))), inner), 0.5));
        return {mul(g, d)};
      }
      case Unary::Softplus: {  // sigmoid(beta x), 1 above the threshold
        const Tensor& x = c.input(0);
        Tensor bx = mul(x, p_);
        return {mul(g, where(gt(bx, q_), ones_like(x), sigmoid(bx)))};
      }
      case Unary::Elu: {  // 1 for x > 0, alpha e^x otherwise
        const Tensor& x = c.input(0);
        return {mul(g, where(gt(x, 0.0), ones_like(x), mul(exp(x), p_)))};
      }
      case Unary::Sign:
      case Unary::Count:
        break;
    }
    return {Tensor()};
  }

 private:
  Unary kind_;
  double p_, q_;
  bool has_p_, has_q_;
};

// The attribute-free kinds; the others have their own public functions.
Tensor unary(Unary k, const Tensor& a) {
  return call1(op_of<UnaryOp, Unary, kUnaryKinds>(k), {a});
}

// ---------------------------------------------------------------- where, casts
class WhereOp final : public Op {
 public:
  std::string_view name() const override { return "where"; }
  SaveSpec saves() const override { return {0b001, 0}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 3, "where: expected 3 inputs, got {}", in.size());
    REMAT_CHECK(in[1].dtype == in[2].dtype, "where: dtype mismatch, {} (shape {}) vs {} (shape {})",
                in[1].dtype, in[1].shape, in[2].dtype, in[2].shape);
    Shape s =
        broadcast_shapes("where", broadcast_shapes("where", in[0].shape, in[1].shape), in[2].shape);
    return {TensorMeta::contiguous(std::move(s), in[1].dtype, in[1].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    visit_dtype(in[0].meta->dtype, [&]<class C>() {
      visit_dtype(in[1].meta->dtype, [&]<class T>() {
        map_kernel<T, C, T, T>(out[0], {in[0], in[1], in[2]},
                               [](C c, T a, T b) { return c != C(0) ? a : b; });
      });
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Shape& shape = out[0].meta->shape;
    detail::cuda_launch::where(detail::scalar_of(in[0].meta->dtype),
                               detail::scalar_of(in[1].meta->dtype), detail::extent_of(shape),
                               detail::operand_of(out[0], shape), detail::operand_of(in[0], shape),
                               detail::operand_of(in[1], shape), detail::operand_of(in[2], shape));
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    const Tensor& g = c.grad(0);
    Tensor z = zeros({}, {g.dtype(), g.device()});
    Tensor ga = c.needs(1) ? sum_to(where(c.input(0), g, z), c.input_meta(1).shape) : Tensor();
    Tensor gb = c.needs(2) ? sum_to(where(c.input(0), z, g), c.input_meta(2).shape) : Tensor();
    return {Tensor(), ga, gb};
  }
};

class CastOp final : public Op {
 public:
  explicit CastOp(DType to) : to_(to) {}
  std::string_view name() const override { return "to_dtype"; }
  SaveSpec saves() const override { return {}; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    return {TensorMeta::contiguous(in[0].shape, to_, in[0].device)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    visit_dtype(in[0].meta->dtype, [&]<class S>() {
      visit_dtype(to_, [&]<class D>() {
        map_kernel<D, S>(out[0], {in[0]}, [](S x) { return static_cast<D>(x); });
      });
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Shape& shape = out[0].meta->shape;
    detail::cuda_launch::copy(detail::scalar_of(to_), detail::scalar_of(in[0].meta->dtype),
                              detail::extent_of(shape), detail::operand_of(out[0], shape),
                              detail::operand_of(in[0], shape));
  }
#endif
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {is_floating(from_) ? to_dtype(c.grad(0), from_) : Tensor()};
  }
  DType from_ = DType::Float32;
  DType to_;
};

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(Binary::Add, a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(Binary::Sub, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(Binary::Mul, a, b);
}
// Integer tensors divide as floats (PyTorch's true division), in float32.
Tensor div(const Tensor& a, const Tensor& b) {
  if (a.defined() && b.defined() && !is_floating(a.dtype()) && !is_floating(b.dtype()))
    return binary(Binary::Div, to_dtype(a, DType::Float32), to_dtype(b, DType::Float32));
  return binary(Binary::Div, a, b);
}
namespace {
// Integer division by zero has no value (and traps on x86); PyTorch raises too.
void check_integer_divisor(std::string_view op, const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || is_floating(b.dtype()) || a.dtype() != b.dtype()) return;
  REMAT_CHECK(sum(eq(b, 0.0)).item<std::int64_t>() == 0,
              "{}: integer division by zero (divisor of shape {})", op, b.shape());
}
}  // namespace
Tensor floor_divide(const Tensor& a, const Tensor& b) {
  check_integer_divisor("floor_divide", a, b);
  return binary(Binary::FloorDiv, a, b);
}
Tensor remainder(const Tensor& a, const Tensor& b) {
  check_integer_divisor("remainder", a, b);
  return binary(Binary::Rem, a, b);
}
Tensor floor_divide(const Tensor& a, double b) {
  return floor_divide(a, scalar_like(a, b));
}
Tensor remainder(const Tensor& a, double b) {
  return remainder(a, scalar_like(a, b));
}
Tensor pow(const Tensor& a, const Tensor& b) {
  return binary(Binary::Pow, a, b);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary(Binary::Max, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary(Binary::Min, a, b);
}
Tensor relu_backward(const Tensor& grad, const Tensor& output) {
  REMAT_CHECK(grad.defined() && output.defined() && grad.shape() == output.shape(),
              "relu_backward: grad and output must have the same shape, got {} and {}",
              grad.defined() ? grad.shape() : Shape{}, output.defined() ? output.shape() : Shape{});
  return binary(Binary::ReluGrad, grad, output);
}
Tensor add(const Tensor& a, double b) {
  return add(a, scalar_like(a, b));
}
Tensor sub(const Tensor& a, double b) {
  return sub(a, scalar_like(a, b));
}
Tensor mul(const Tensor& a, double b) {
  return mul(a, scalar_like(a, b));
}
Tensor div(const Tensor& a, double b) {
  const Tensor n = a.defined() && !is_floating(a.dtype()) ? to_dtype(a, DType::Float32) : a;
  return div(n, scalar_like(n, b));
}
Tensor rsub(double a, const Tensor& b) {
  return sub(scalar_like(b, a), b);
}
Tensor rdiv(double a, const Tensor& b) {
  const Tensor d = b.defined() && !is_floating(b.dtype()) ? to_dtype(b, DType::Float32) : b;
  return div(scalar_like(d, a), d);
}
Tensor pow(const Tensor& a, double e) {
  return call1(std::make_shared<UnaryOp>(Unary::PowScalar, e), {a});
}

Tensor eq(const Tensor& a, const Tensor& b) {
  return binary(Binary::Eq, a, b);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return binary(Binary::Ne, a, b);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return binary(Binary::Lt, a, b);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return binary(Binary::Le, a, b);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return binary(Binary::Gt, a, b);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return binary(Binary::Ge, a, b);
}
Tensor eq(const Tensor& a, double b) {
  return eq(a, scalar_like(a, b));
}
Tensor ne(const Tensor& a, double b) {
  return ne(a, scalar_like(a, b));
}
Tensor lt(const Tensor& a, double b) {
  return lt(a, scalar_like(a, b));
}
Tensor le(const Tensor& a, double b) {
  return le(a, scalar_like(a, b));
}
Tensor gt(const Tensor& a, double b) {
  return gt(a, scalar_like(a, b));
}
Tensor ge(const Tensor& a, double b) {
  return ge(a, scalar_like(a, b));
}

Tensor neg(const Tensor& a) {
  return unary(Unary::Neg, a);
}
Tensor exp(const Tensor& a) {
  return unary(Unary::Exp, a);
}
Tensor log(const Tensor& a) {
  return unary(Unary::Log, a);
}
Tensor sqrt(const Tensor& a) {
  return unary(Unary::Sqrt, a);
}
Tensor rsqrt(const Tensor& a) {
  return unary(Unary::Rsqrt, a);
}
Tensor abs(const Tensor& a) {
  return unary(Unary::Abs, a);
}
Tensor sign(const Tensor& a) {
  return unary(Unary::Sign, a);
}
Tensor tanh(const Tensor& a) {
  return unary(Unary::Tanh, a);
}
Tensor sigmoid(const Tensor& a) {
  return unary(Unary::Sigmoid, a);
}
Tensor relu(const Tensor& a) {
  return unary(Unary::Relu, a);
}
Tensor gelu(const Tensor& a) {
  return unary(Unary::Gelu, a);
}
Tensor erf(const Tensor& a) {
  return unary(Unary::Erf, a);
}
Tensor sin(const Tensor& a) {
  return unary(Unary::Sin, a);
}
Tensor cos(const Tensor& a) {
  return unary(Unary::Cos, a);
}
Tensor log1p(const Tensor& a) {
  return unary(Unary::Log1p, a);
}
Tensor expm1(const Tensor& a) {
  return unary(Unary::Expm1, a);
}
Tensor silu(const Tensor& a) {
  return unary(Unary::Silu, a);
}
Tensor gelu(const Tensor& a, std::string_view approximate) {
  if (approximate == "none") return gelu(a);
  REMAT_CHECK(approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '{}'",
              approximate);
  return unary(Unary::GeluTanh, a);
}
Tensor softplus(const Tensor& a, double beta, double threshold) {
  REMAT_CHECK(beta > 0, "softplus: beta must be positive, got {}", beta);
  return call1(std::make_shared<UnaryOp>(Unary::Softplus, beta, threshold), {a});
}
Tensor elu(const Tensor& a, double alpha) {
  return call1(std::make_shared<UnaryOp>(Unary::Elu, alpha), {a});
}
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  REMAT_CHECK(a.defined() && mask.defined(), "masked_fill: undefined tensor");
  return where(mask, scalar_like(a, value), a);
}
Tensor leaky_relu(const Tensor& a, double slope) {
  return call1(std::make_shared<UnaryOp>(Unary::LeakyRelu, slope), {a});
}
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max) {
  REMAT_CHECK(min || max, "clamp: at least one of min and max must be given");
  return call1(std::make_shared<UnaryOp>(Unary::Clamp, min.value_or(0), max.value_or(0),
                                         min.has_value(), max.has_value()),
               {a});
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  static const auto op = std::make_shared<WhereOp>();
  return call1(op, {cond, a, b});
}

Tensor to_dtype(const Tensor& a, DType dtype) {
  if (a.dtype() == dtype) return a;
  auto op = std::make_shared<CastOp>(dtype);
  op->from_ = a.dtype();
  return call1(op, {a});
}

}  // namespace remat
