// The Child-Sum TreeLSTM of Tai et al. (2015), over each example's own tree: a node's input is
// its token's embedding, its state comes from the sum of its children's hidden states, with one
// forget gate per child.  A batch of trees runs level by level: the nodes of equal height
// across the batch go through one op each (the children found with index_select, summed with
// index_add), so the graph follows the batch's trees and differs for every batch.
// Usage: models::TreeLSTM net({.vocabulary = listops::kVocabulary, .classes = 10});
//        Tensor logits = net.logits(trees);  // [trees, classes]
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "nn/layers.h"
#include "nn/listops.h"
#include "nn/module.h"

namespace remat::models {

struct TreeLSTMOptions {
  std::int64_t vocabulary = listops::kVocabulary;
  std::int64_t embedding_dim = 64;
  std::int64_t hidden = 128;
  std::int64_t classes = 10;
};

class TreeLSTM : public nn::Module {
 public:
  explicit TreeLSTM(TreeLSTMOptions options = {});
  // The root's hidden state per tree, [trees, hidden].
  Tensor encode(std::span<const listops::Tree> trees);
  // Class scores on each root, [trees, classes].
  Tensor logits(std::span<const listops::Tree> trees);
  const TreeLSTMOptions& options() const { return options_; }

 private:
  TreeLSTMOptions options_;
  std::shared_ptr<nn::Embedding> embed_;
  std::shared_ptr<nn::Linear> w_iou_, u_iou_, w_f_, u_f_, head_;
};

}  // namespace remat::models
