// Autograd metadata of a tensor (its gradient, the node that produced it) and the helpers the
// dispatch path uses to connect op calls into the graph.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "autograd/node.h"

namespace remat {

class AutogradMeta final : public AutogradMetaInterface {
 public:
  const Tensor& grad() const override { return grad_; }
  void set_grad(Tensor grad) override { grad_ = std::move(grad); }
  bool requires_grad() const override { return requires_grad_ || grad_fn_ != nullptr; }
  void set_requires_grad(bool value, const Tensor& self) override;
  bool is_leaf() const override { return grad_fn_ == nullptr; }

  Tensor grad_;
  bool requires_grad_ = false;
  std::shared_ptr<Node> grad_fn_;
  std::uint32_t output_nr_ = 0;
  std::weak_ptr<Node> grad_accumulator_;
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks_;  // autograd/hooks.h
};

// The edge a gradient for `t` flows into: its producing node, or its leaf accumulator;
// invalid when t needs no gradient.
Edge gradient_edge(const Tensor& t);
// Makes `t` the output `output_nr` of `node`.
void set_history(const Tensor& t, const std::shared_ptr<Node>& node, std::uint32_t output_nr);
// The producing node of t, or null for leaves.
std::shared_ptr<Node> grad_fn(const Tensor& t);
// A new handle on the same cell and view, without autograd history.
Tensor alias_without_history(const Tensor& t);

}  // namespace remat
