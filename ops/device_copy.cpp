#include "ops/device_copy.h"

#include "core/cuda.h"
#include "ops/op.h"
#include "ops/view.h"

namespace remat {
namespace {

// Input: a contiguous tensor; output: the same bytes on `to_`.  The kernel runs as the output's
// device's (Op::execute): cpu() copies from a device, cuda() to one.
class ToDeviceOp final : public Op {
 public:
  explicit ToDeviceOp(Device to) : to_(to) {}
  std::string_view name() const override { return "to"; }
  bool makes_constants() const override { return true; }
  std::vector<TensorMeta> infer(std::span<const TensorMeta> in) const override {
    REMAT_CHECK(in.size() == 1 && in[0].is_contiguous(),
                "to: internal error, expected one contiguous input");
    return {TensorMeta::contiguous(in[0].shape, in[0].dtype, to_)};
  }
  void cpu(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    detail::cuda_memory::copy_to_host(out[0].bytes(), in[0].bytes(), in[0].meta->nbytes());
  }
  void cuda(std::span<const KernelArg> in, std::span<const KernelArg> out) const override {
    if (in[0].meta->device.is_cpu())
      detail::cuda_memory::copy_from_host(out[0].bytes(), in[0].bytes(), in[0].meta->nbytes());
    else
      detail::cuda_memory::copy_on_device(out[0].bytes(), in[0].bytes(), in[0].meta->nbytes());
  }
  std::vector<Tensor> backward(const BackwardContext& c) const override {
    return {to(c.grad(0), c.input_meta(0).device)};
  }
  double flops(std::span<const TensorMeta>, std::span<const TensorMeta>) const override {
    return 0;
  }

 private:
  Device to_;
};

}  // namespace

Tensor to(const Tensor& t, Device device) {
  REMAT_CHECK(t.defined(), "to: the tensor is undefined");
  if (t.device() == device) return t;
  REMAT_CHECK(device.is_cpu() || cuda::available(), "to({}): {}", device,
              cuda::unavailable_reason());
  return call1(std::make_shared<ToDeviceOp>(device), {contiguous(t)});
}

}  // namespace remat
