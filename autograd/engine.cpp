#include "autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/hooks.h"
#include "autograd/meta.h"

namespace remat {
namespace {

struct NodeState {
  int dependencies = 0;
  bool needed = true;
  std::vector<Tensor> buffer;  // incoming gradients, one per forward output
};

class GraphTask {
 public:
  GraphTask(bool keep_graph, bool create_graph)
      : keep_graph_(keep_graph), create_graph_(create_graph) {}

  // Runs the graph below `roots`, seeded with `root_grads`.  With captures, only nodes that
  // lead to a captured edge run, and the gradient reaching each captured edge is returned.
  std::vector<Tensor> run(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads,
                          const std::vector<Edge>& captures) {
    discover(roots);
    if (!captures.empty()) mark_needed(captures);
    std::vector<Tensor> captured(captures.size());
    auto by_sequence = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
    std::priority_queue<Node*, std::vector<Node*>, decltype(by_sequence)> ready(by_sequence);

    for (std::size_t i = 0; i < roots.size(); ++i) {
      if (roots[i].valid()) add_gradient(roots[i], root_grads[i]);
    }
    for (auto& [node, st] : states_)
      if (st.dependencies == 0) ready.push(node);

    GradModeGuard mode(create_graph_);
    while (!ready.empty()) {
      Node* node = ready.top();
      ready.pop();
      NodeState& st = states_.at(node);
      for (std::size_t c = 0; c < captures.size(); ++c) {
        if (captures[c].node.get() == node) captured[c] = st.buffer[captures[c].input_nr];
      }
      std::vector<Tensor> outputs;
      if (st.needed) {
        outputs = node->apply(take_buffer(node, st));
      } else {
        st.buffer.clear();
      }
      if (!keep_graph_) node->release_saved();
      const auto& edges = node->next_edges();
      for (std::size_t i = 0; i < edges.size(); ++i) {
        const Edge& e = edges[i];
        if (!e.valid()) continue;
        if (i < outputs.size() && outputs[i].defined()) {
          check_gradient(*node, i, e, outputs[i]);
          add_gradient(e, outputs[i]);
        }
        NodeState& next = states_.at(e.node.get());
        if (--next.dependencies == 0) ready.push(e.node.get());
      }
    }
    return captured;
  }

 private:
  void discover(const std::vector<Edge>& roots) {
    std::vector<Node*> stack;
    for (const auto& r : roots) {
      if (!r.valid()) continue;
      if (states_.emplace(r.node.get(), NodeState{}).second) stack.push_back(r.node.get());
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      states_.at(n).buffer.resize(n->num_outputs());
      for (const auto& e : n->next_edges()) {
        if (!e.valid()) continue;
        auto [it, inserted] = states_.emplace(e.node.get(), NodeState{});
        ++it->second.dependencies;
        if (inserted) stack.push_back(e.node.get());
      }
    }
  }

  // grad(): a node runs only when a captured edge lies below it, and leaf accumulators never
  // run, so no grad() is touched.  Post-order over the discovered graph, without recursion.
  void mark_needed(const std::vector<Edge>& captures) {
    std::unordered_set<Node*> targets;
    for (const auto& c : captures) targets.insert(c.node.get());
    std::unordered_set<Node*> done;
    for (auto& [root, unused] : states_) {
      if (done.count(root)) continue;
      std::vector<std::pair<Node*, std::size_t>> stack{{root, 0}};
      std::unordered_set<Node*> open{root};
      while (!stack.empty()) {
        auto& [n, i] = stack.back();
        const auto& edges = n->next_edges();
        if (i < edges.size()) {
          Node* child = edges[i++].node.get();
          if (child && !done.count(child) && open.insert(child).second) stack.push_back({child, 0});
          continue;
        }
        bool needed = false;
        for (const auto& e : edges)
          if (e.valid() && (targets.count(e.node.get()) || states_.at(e.node.get()).needed))
            needed = true;
        states_.at(n).needed = needed;
        done.insert(n);
        stack.pop_back();
      }
    }
  }

  void add_gradient(const Edge& e, const Tensor& g) {
    Tensor& slot = states_.at(e.node.get()).buffer[e.input_nr];
    slot = slot.defined() ? engine_ops().add(slot, g) : g;
    // A gradient waiting for its node is never recomputed: its record reaches back through the
    // backward pass so far (for a recurrent model, every earlier time step), so one evicted
    // gradient could pin a chain of released ones.  Frozen, it also frees that history.  With
    // create_graph it stays an ordinary cell, part of the graph being differentiated.
    if (!GradMode::is_enabled()) slot.storage()->freeze(StorageRole::EngineGradient);
  }

  std::vector<Tensor> take_buffer(Node* node, NodeState& st) {
    std::vector<Tensor> grads = std::move(st.buffer);
    for (std::size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) grads[i] = engine_ops().zeros(node->output_metas()[i]);
    return grads;
  }

  static void check_gradient(const Node& node, std::size_t i, const Edge& e, const Tensor& g) {
    const auto& expected = e.node->output_metas()[e.input_nr];
    REMAT_CHECK(g.shape() == expected.shape && g.dtype() == expected.dtype,
                "{}: gradient for input {} has shape {} and dtype {}, expected {} and {}",
                node.name(), i, g.shape(), g.dtype(), expected.shape, expected.dtype);
  }

  bool keep_graph_, create_graph_;
  std::unordered_map<Node*, NodeState> states_;
};

// The callbacks of the backward() call in progress on this thread (null outside one).
thread_local std::vector<std::function<void()>>* t_backward_callbacks = nullptr;

// Runs the graph task; then, before returning, the callbacks its hooks queued.  Nested
// backward() calls (from a hook) keep their own lists.
void run_backward(GraphTask task, const std::vector<Edge>& roots,
                  const std::vector<Tensor>& grads) {
  std::vector<std::function<void()>> callbacks;
  auto* outer = t_backward_callbacks;
  t_backward_callbacks = &callbacks;
  struct Restore {
    std::vector<std::function<void()>>* outer;
    ~Restore() { t_backward_callbacks = outer; }
  } restore{outer};
  task.run(roots, grads, {});
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    auto fn = std::move(callbacks[i]);  // fn may queue more, which reallocates the list
    fn();
  }
}

std::vector<Tensor> default_grad_outputs(const std::vector<Tensor>& outputs,
                                         const std::vector<Tensor>& given, const char* op) {
  REMAT_CHECK(given.empty() || given.size() == outputs.size(),
              "{}: got {} grad_outputs for {} outputs", op, given.size(), outputs.size());
  std::vector<Tensor> grads(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    REMAT_CHECK(out.defined(), "{}: output {} is undefined", op, i);
    REMAT_CHECK(out.requires_grad(),
                "{}: output {} (shape {}) does not require grad and has no grad_fn", op, i,
                out.shape());
    if (!given.empty() && given[i].defined()) {
      REMAT_CHECK(given[i].shape() == out.shape(),
                  "{}: grad_output {} has shape {} but the output has shape {}", op, i,
                  given[i].shape(), out.shape());
      grads[i] = given[i];
    } else {
      REMAT_CHECK(out.numel() == 1,
                  "{}: grad can be implicitly created only for one-element outputs, output {} "
                  "has shape {}",
                  op, i, out.shape());
      grads[i] = engine_ops().ones(TensorMeta::contiguous(out.shape(), out.dtype(), out.device()));
    }
  }
  return grads;
}

}  // namespace

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph) {
  auto grads = default_grad_outputs(outputs, grad_outputs, "backward");
  std::vector<Edge> roots;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    roots.push_back(gradient_edge(outputs[i]));
  }
  run_backward(GraphTask(retain_graph || create_graph, create_graph), roots, grads);
}

void queue_backward_callback(std::function<void()> fn) {
  REMAT_CHECK(t_backward_callbacks != nullptr,
              "queue_backward_callback: no backward() call is running on this thread");
  REMAT_CHECK(fn != nullptr, "queue_backward_callback: the callback is empty");
  t_backward_callbacks->push_back(std::move(fn));
}

void register_post_accumulate_grad_hook(const Tensor& leaf,
                                        std::function<void(const Tensor&)> hook) {
  REMAT_CHECK(leaf.defined(), "register_post_accumulate_grad_hook: the tensor is undefined");
  REMAT_CHECK(leaf.is_leaf() && leaf.requires_grad(),
              "register_post_accumulate_grad_hook: tensor of shape {} is not a leaf that "
              "requires grad",
              leaf.shape());
  REMAT_CHECK(hook != nullptr, "register_post_accumulate_grad_hook: the hook is empty");
  static_cast<AutogradMeta*>(leaf.autograd_meta())
      ->post_accumulate_hooks_.push_back(std::move(hook));
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  auto grads = default_grad_outputs(outputs, grad_outputs, "grad");
  std::vector<Edge> roots, captures;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    roots.push_back(gradient_edge(outputs[i]));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    REMAT_CHECK(inputs[i].defined() && inputs[i].requires_grad(),
                "grad: input {} does not require grad", i);
    captures.push_back(gradient_edge(inputs[i]));
  }
  auto result = GraphTask(retain_graph || create_graph, create_graph).run(roots, grads, captures);
  for (std::size_t i = 0; i < result.size(); ++i) {
    REMAT_CHECK(result[i].defined() || allow_unused,
                "grad: input {} (shape {}) was not used to compute the outputs; pass "
                "allow_unused=true if this is intended",
                i, inputs[i].shape());
    if (result[i].defined() && !create_graph) result[i] = alias_without_history(result[i]);
  }
  return result;
}

}  // namespace remat
