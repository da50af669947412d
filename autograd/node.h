// Autograd graph nodes.  A node holds the backward function its op gave it, the edges to the
// nodes of its inputs, and saved tensors as ordinary handles (evictable cells like any other),
// which it releases once the engine has consumed it.  Inside a checkpoint, a saved tensor that
// the checkpoint's replay recreates is held as a slot of the checkpoint's frame instead.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/function.h"
#include "autograd/saved_slot.h"
#include "core/small_vector.h"

namespace remat {

class Node;

struct Edge {
  std::shared_ptr<Node> node;
  std::uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

// Inline for the common arities: a node's lists take no allocation of their own.
using EdgeList = SmallVector<Edge, 2>;
using MetaList = SmallVector<TensorMeta, 1>;

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node(EdgeList next_edges, MetaList output_metas);
  virtual ~Node();

  virtual std::string_view name() const = 0;
  // grads: one per forward output (never undefined); returns one per next edge.
  virtual std::vector<Tensor> apply(std::vector<Tensor> grads) = 0;
  virtual void release_saved() {}

  const EdgeList& next_edges() const { return next_edges_; }
  const MetaList& output_metas() const { return output_metas_; }
  std::size_t num_outputs() const { return output_metas_.size(); }
  std::uint64_t sequence_nr() const { return sequence_nr_; }

 protected:
  EdgeList next_edges_;
  MetaList output_metas_;
  std::uint64_t sequence_nr_;
};

// The node of one op call.
class OpNode final : public Node {
 public:
  OpNode(std::shared_ptr<const BackwardFunction> fn, EdgeList next_edges,
         std::span<const TensorMeta> input_metas, MetaList output_metas);
  std::string_view name() const override { return fn_->name(); }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override;
  void release_saved() override;

  // Called by the dispatch path right after the forward.
  void save_input(std::size_t i, const Tensor& t);
  void save_output(std::size_t i, const Tensor& t);

 private:
  std::shared_ptr<const BackwardFunction> fn_;
  SmallVector<TensorMeta, 2> input_metas_;
  SmallVector<Tensor, 2> saved_inputs_;
  SmallVector<Tensor, 1> saved_outputs_;          // detached aliases: no cycle through this node
  SmallVector<std::uint64_t, 3> saved_versions_;  // of every saved tensor, inputs then outputs
  // Saved tensors a checkpoint recreates: which input or output, and where to fetch it.
  struct Slot {
    std::size_t index;
    bool output;
    detail::SlotRef ref;
  };
  std::vector<Slot> slots_;
  bool saved_any_ = false;
  bool released_ = false;
};

// The sink of a leaf that requires grad: adds the incoming gradient to leaf.grad().
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf);
  std::string_view name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override;

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

}  // namespace remat
