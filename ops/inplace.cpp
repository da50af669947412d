#include "ops/inplace.h"

#include "ops/cpu/loops.h"
#include "ops/cuda/device_args.h"
#include "ops/elementwise_math.h"
#include "ops/op.h"

namespace remat {
namespace {

using Kind = detail::Inplace;

constexpr std::string_view kind_name(Kind k) {
  constexpr std::string_view names[] = {"add_",     "add_",     "mul_",  "mul_", "div_",
                                        "addcmul_", "addcdiv_", "fill_", "copy_"};
  return names[static_cast<int>(k)];
}

// Input 0 is self (read through self's view, possibly from the old value's cell); the output is
// written through the same view.  The kernels are element-wise, so reading and writing the same
// buffer is safe.
class InplaceOp final : public Op {
 public:
  InplaceOp(Kind kind, double value) : kind_(kind), value_(value) {}
  std::string_view name() const override { return kind_name(kind_); }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    const TensorMeta& self = in[0];
    for (std::size_t i = 1; i < in.size(); ++i) {
      REMAT_CHECK(kind_ == Kind::Copy || in[i].dtype == self.dtype,
                  "{}: dtype mismatch, self is {} (shape {}) but argument {} is {} (shape {})",
                  name(), self.dtype, self.shape, i, in[i].dtype, in[i].shape);
      const Shape b = broadcast_shapes(name(), self.shape, in[i].shape);
      REMAT_CHECK(b == self.shape, "{}: argument of shape {} does not broadcast to self's shape {}",
                  name(), in[i].shape, self.shape);
    }
    return {self};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::visit_dtype(out[0].meta->dtype, [&]<class T>() {
      const T v = static_cast<T>(value_);
      switch (kind_) {
        case Kind::AddScaled:
          detail::map_kernel<T, T, T>(out[0], {in[0], in[1]},
                                      [v](T s, T o) { return static_cast<T>(s + v * o); });
          break;
        case Kind::AddScalar:
          detail::map_kernel<T, T>(out[0], {in[0]}, [v](T s) { return static_cast<T>(s + v); });
          break;
        case Kind::Mul:
          detail::map_kernel<T, T, T>(out[0], {in[0], in[1]},
                                      [](T s, T o) { return static_cast<T>(s * o); });
          break;
        case Kind::MulScalar:
          detail::map_kernel<T, T>(out[0], {in[0]}, [v](T s) { return static_cast<T>(s * v); });
          break;
        case Kind::Div:
          detail::map_kernel<T, T, T>(out[0], {in[0], in[1]},
                                      [](T s, T o) { return static_cast<T>(s / o); });
          break;
        case Kind::Addcmul:
          detail::map_kernel<T, T, T, T>(out[0], {in[0], in[1], in[2]}, [v](T s, T a, T b) {
            return static_cast<T>(s + v * a * b);
          });
          break;
        case Kind::Addcdiv:
          detail::map_kernel<T, T, T, T>(out[0], {in[0], in[1], in[2]}, [v](T s, T a, T b) {
            return static_cast<T>(s + v * a / b);
          });
          break;
        case Kind::Fill:
          detail::map_kernel<T, T>(out[0], {in[0]}, [v](T) { return v; });
          break;
        case Kind::Copy:
          detail::visit_dtype(in[1].meta->dtype, [&]<class S>() {
            detail::map_kernel<T, T, S>(out[0], {in[0], in[1]},
                                        [](T, S x) { return static_cast<T>(x); });
          });
          break;
      }
    });
  }
#if REMAT_WITH_CUDA
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    const Shape& shape = out[0].meta->shape;
    const auto scalar = detail::scalar_of(out[0].meta->dtype);
    if (kind_ == Kind::Copy) {  // a cast from src's dtype, broadcast to self's shape
      detail::cuda_launch::copy(scalar, detail::scalar_of(in[1].meta->dtype),
                                detail::extent_of(shape), detail::operand_of(out[0], shape),
                                detail::operand_of(in[1], shape));
      return;
    }
    detail::cuda_launch::Operand operands[3];
    for (std::size_t i = 0; i < in.size() && i < 3; ++i)
      operands[i] = detail::operand_of(in[i], shape);
    detail::cuda_launch::inplace(static_cast<int>(kind_), scalar, detail::extent_of(shape),
                                 detail::operand_of(out[0], shape), operands[0], operands[1],
                                 operands[2], value_);
  }
#endif

 private:
  Kind kind_;
  double value_;
};

const Tensor& run(Kind kind, double value, const Tensor& self, std::vector<Tensor> others) {
  call_inplace(std::make_shared<InplaceOp>(kind, value), self, std::move(others));
  return self;
}

}  // namespace

const Tensor& add_(const Tensor& self, const Tensor& other, double alpha) {
  return run(Kind::AddScaled, alpha, self, {other});
}
const Tensor& add_(const Tensor& self, double value) {
  return run(Kind::AddScalar, value, self, {});
}
const Tensor& sub_(const Tensor& self, const Tensor& other, double alpha) {
  return run(Kind::AddScaled, -alpha, self, {other});
}
const Tensor& mul_(const Tensor& self, const Tensor& other) {
  return run(Kind::Mul, 0, self, {other});
}
const Tensor& mul_(const Tensor& self, double value) {
  return run(Kind::MulScalar, value, self, {});
}
const Tensor& div_(const Tensor& self, const Tensor& other) {
  return run(Kind::Div, 0, self, {other});
}
const Tensor& div_(const Tensor& self, double value) {
  return run(Kind::MulScalar, 1.0 / value, self, {});
}
const Tensor& addcmul_(const Tensor& self, const Tensor& a, const Tensor& b, double value) {
  return run(Kind::Addcmul, value, self, {a, b});
}
const Tensor& addcdiv_(const Tensor& self, const Tensor& a, const Tensor& b, double value) {
  return run(Kind::Addcdiv, value, self, {a, b});
}
const Tensor& zero_(const Tensor& self) {
  return run(Kind::Fill, 0, self, {});
}
const Tensor& fill_(const Tensor& self, double value) {
  return run(Kind::Fill, value, self, {});
}
const Tensor& copy_(const Tensor& self, const Tensor& src) {
  return run(Kind::Copy, 0, self, {src});
}

}  // namespace remat
