#include "autograd/node.h"

#include <atomic>

#include "autograd/grad_mode.h"
#include "autograd/meta.h"
#include "core/release.h"

namespace remat {
namespace {
std::atomic<std::uint64_t> g_sequence{0};
EngineOps g_engine_ops;
}  // namespace

void set_engine_ops(EngineOps ops) {
  g_engine_ops = ops;
}
const EngineOps& engine_ops() {
  return g_engine_ops;
}

Node::Node(EdgeList next_edges, MetaList output_metas)
    : next_edges_(std::move(next_edges)),
      output_metas_(std::move(output_metas)),
      sequence_nr_(g_sequence.fetch_add(1)) {}

Node::~Node() {
  for (auto& e : next_edges_)
    if (e.node) release_later(std::move(e.node));
}

OpNode::OpNode(std::shared_ptr<const BackwardFunction> fn, EdgeList next_edges,
               std::span<const TensorMeta> input_metas, MetaList output_metas)
    : Node(std::move(next_edges), std::move(output_metas)),
      fn_(std::move(fn)),
      input_metas_(input_metas) {
  saved_inputs_.resize(next_edges_.size());
  saved_outputs_.resize(output_metas_.size());
  saved_versions_.resize(saved_inputs_.size() + saved_outputs_.size());
}

void OpNode::save_input(std::size_t i, const Tensor& t) {
  saved_any_ = true;
  if (auto ref = detail::pack_saved(t)) {
    slots_.push_back({i, false, std::move(*ref)});
    return;
  }
  saved_inputs_[i] = t;
  saved_versions_[i] = t.storage()->version();
}

void OpNode::save_output(std::size_t i, const Tensor& t) {
  saved_any_ = true;
  if (auto ref = detail::pack_saved(t)) {
    slots_.push_back({i, true, std::move(*ref)});
    return;
  }
  saved_outputs_[i] = alias_without_history(t);
  saved_versions_[saved_inputs_.size() + i] = t.storage()->version();
}

void OpNode::release_saved() {
  for (auto& t : saved_inputs_) t = Tensor();
  for (auto& t : saved_outputs_) t = Tensor();
  for (auto& s : slots_) s.ref.release();
  slots_.clear();
  released_ = true;
}

std::vector<Tensor> OpNode::apply(std::vector<Tensor> grads) {
  REMAT_CHECK(!(released_ && saved_any_),
              "{}: trying to backward through the graph a second time; its saved tensors were "
              "released. Pass retain_graph=true to the first backward or grad call.",
              fn_->name());
  for (std::size_t i = 0; i < saved_versions_.size(); ++i) {
    const bool is_input = i < saved_inputs_.size();
    const Tensor& t = is_input ? saved_inputs_[i] : saved_outputs_[i - saved_inputs_.size()];
    REMAT_CHECK(!t.defined() || t.storage()->version() == saved_versions_[i],
                "{}: {} {} (shape {}) needed for the gradient was modified by an in-place "
                "operation after it was saved (version {}, now {})",
                fn_->name(), is_input ? "input" : "output", is_input ? i : i - saved_inputs_.size(),
                t.shape(), saved_versions_[i], t.storage()->version());
  }
  // Slots hold values a checkpoint recreates (its replay runs on the first fetch).  A recreated
  // input takes the history of the original, so a graph of the gradient connects as without
  // the checkpoint.
  SmallVector<Tensor, 2> inputs;
  SmallVector<Tensor, 1> outputs = saved_outputs_;
  if (!slots_.empty()) {
    inputs = saved_inputs_;
    for (const auto& s : slots_) {
      Tensor v = s.ref.fetch();
      if (s.output) {
        outputs[s.index] = v;
      } else {
        const Edge& e = next_edges_[s.index];
        if (e.valid()) set_history(v, e.node, e.input_nr);
        inputs[s.index] = v;
      }
    }
  }
  const std::span<const Tensor> saved_inputs =
      slots_.empty() ? std::span<const Tensor>(saved_inputs_) : std::span<const Tensor>(inputs);
  // When building a graph of the gradient, saved outputs must lead back into this node.
  if (GradMode::is_enabled()) {
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].defined() || !is_floating(outputs[i].dtype())) continue;
      outputs[i] = alias_without_history(outputs[i]);
      set_history(outputs[i], shared_from_this(), static_cast<std::uint32_t>(i));
    }
  }
  SmallVector<bool, 8> needs;
  for (const Edge& e : next_edges_) needs.push_back(e.valid());
  BackwardContext ctx{grads, saved_inputs, outputs, needs, input_metas_};
  auto result = fn_->backward(ctx);
  REMAT_CHECK(result.size() == next_edges_.size(),
              "{}: backward returned {} gradients for {} inputs", fn_->name(), result.size(),
              next_edges_.size());
  return result;
}

AccumulateGrad::AccumulateGrad(const Tensor& leaf)
    : Node({}, {leaf.meta()}), leaf_(leaf.impl_ptr()) {}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor> grads) {
  auto impl = leaf_.lock();
  if (!impl) return {};
  Tensor leaf(impl);
  Tensor g = grads.at(0);
  // Without create_graph the stored gradient carries no history.
  if (!GradMode::is_enabled()) g = alias_without_history(g);
  Tensor old = leaf.grad();
  if (old.defined()) g = engine_ops().add(old, g);
  // A plain gradient is what the optimizer reads next; recomputing it would replay the whole
  // backward pass, so the cache keeps it.  With create_graph it stays an ordinary cell.
  if (!GradMode::is_enabled()) g.storage()->freeze(StorageRole::Gradient);
  leaf.set_grad(g);
  if (auto* meta = static_cast<AutogradMeta*>(leaf.autograd_meta()))
    for (std::size_t i = 0; i < meta->post_accumulate_hooks_.size(); ++i)
      meta->post_accumulate_hooks_[i](leaf);
  return {};
}

}  // namespace remat
