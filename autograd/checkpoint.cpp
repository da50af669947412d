#include "autograd/checkpoint.h"

#include "autograd/checkpoint_frame.h"
#include "autograd/grad_mode.h"
#include "autograd/placeholder.h"

namespace remat {

std::vector<Tensor> checkpoint(const TensorsFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options) {
  REMAT_CHECK(static_cast<bool>(fn), "checkpoint '{}': the function is empty", options.name);
  for (std::size_t i = 0; i < inputs.size(); ++i)
    REMAT_CHECK(inputs[i].defined(), "checkpoint '{}': input {} is an undefined tensor",
                options.name, i);
  auto* top = detail::current_frame();
  if (top && top->replaying()) return top->run_nested(fn, inputs);
  // Nothing is recorded without grad mode, so there is nothing to replay.
  if (!GradMode::is_enabled()) return fn(inputs);
  auto frame = std::make_shared<detail::CheckpointFrame>(fn, options);
  return frame->record(inputs);
}

Tensor checkpoint(const TensorFn& fn, const Tensor& input, const CheckpointOptions& options) {
  REMAT_CHECK(static_cast<bool>(fn), "checkpoint '{}': the function is empty", options.name);
  auto wrapped = [fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in.at(0))}; };
  return checkpoint(TensorsFn(wrapped), std::vector<Tensor>{input}, options).at(0);
}

Region::Region(TensorsFn fn, std::string name, bool recompute)
    : fn_(std::move(fn)), name_(std::move(name)), recompute_(recompute) {
  REMAT_CHECK(static_cast<bool>(fn_), "region '{}': the function is empty", name_);
  REMAT_CHECK(!name_.empty(), "region: the name is empty");
}

std::vector<Tensor> Region::operator()(const std::vector<Tensor>& inputs) const {
  auto* frame = detail::current_frame();
  if (!frame) return fn_(inputs);
  if (frame->replaying()) return frame->replay_region(name_, recompute_, fn_, inputs);
  return frame->record_region(name_, recompute_, fn_, inputs);
}

Tensor Region::operator()(const Tensor& input) const {
  auto outputs = (*this)(std::vector<Tensor>{input});
  REMAT_CHECK(outputs.size() == 1, "region '{}': called on one tensor, it returned {} outputs",
              name_, outputs.size());
  return outputs[0];
}

Region region(TensorsFn fn, std::string name, bool recompute) {
  return Region(std::move(fn), std::move(name), recompute);
}

Region region(TensorFn fn, std::string name, bool recompute) {
  REMAT_CHECK(static_cast<bool>(fn), "region '{}': the function is empty", name);
  auto wrapped = [fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in.at(0))}; };
  return Region(TensorsFn(wrapped), std::move(name), recompute);
}

void recompute_needs_tensor(const Tensor& t) {
  REMAT_CHECK(t.defined(), "recompute_needs_tensor: the tensor is undefined");
  auto* frame = detail::current_frame();
  if (frame && frame->recording()) frame->keep_for_recompute(t);
}

bool is_placeholder(const Tensor& t) {
  return t.defined() && t.storage()->is_placeholder();
}

bool is_recomputing() {
  auto* frame = detail::current_frame();
  return frame && frame->replaying();
}

}  // namespace remat
