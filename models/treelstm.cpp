#include "models/treelstm.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/index.h"
#include "ops/join.h"
#include "ops/view.h"

namespace remat::models {
namespace {

// Where every node of a batch of trees sits: nodes are grouped by height (leaves 0, a parent
// one above its highest child) and numbered within their level.  Each level's states are their
// own tensors: a child is read from its level by position, so the backward of that read is as
// large as the level, not as all the levels below it.
struct LevelPlan {
  struct Level {
    std::vector<std::int64_t> tokens;  // of each node
    // Child edges grouped by the child's level: from[k] holds the children's positions in
    // level k, parents the parent's position here, edges of level 0 first, then 1, ...
    std::vector<std::vector<std::int64_t>> from;
    std::vector<std::int64_t> parents;
  };
  std::vector<Level> levels;
  std::vector<std::vector<std::int64_t>> roots;  // per level, positions of the roots there
  std::vector<std::int64_t> root_order;          // tree t's root is row root_order[t] of the roots
};

LevelPlan plan_levels(std::span<const listops::Tree> trees) {
  REMAT_CHECK(!trees.empty(), "TreeLSTM: a batch needs at least one tree");
  struct Place {
    int level;
    std::int64_t pos;
  };
  std::vector<std::vector<Place>> places(trees.size());
  LevelPlan plan;
  // Edges per level, per source level, in tree order (parents are filled below).
  std::vector<std::vector<std::vector<std::int64_t>>> edge_parents;
  for (std::size_t t = 0; t < trees.size(); ++t) {
    const auto& tree = trees[t];
    REMAT_CHECK(!tree.token.empty() && tree.children.size() == tree.token.size(),
                "TreeLSTM: tree {} has {} tokens and {} child lists", t, tree.token.size(),
                tree.children.size());
    auto& at = places[t];
    at.resize(tree.token.size());
    for (std::size_t n = 0; n < tree.token.size(); ++n) {
      int level = 0;
      for (int c : tree.children[n]) {
        REMAT_CHECK(c >= 0 && static_cast<std::size_t>(c) < n,
                    "TreeLSTM: tree {} is not in post-order (node {} has child {})", t, n, c);
        level = std::max(level, at[c].level + 1);
      }
      if (plan.levels.size() <= static_cast<std::size_t>(level)) {
        plan.levels.resize(level + 1);
        edge_parents.resize(level + 1);
      }
      auto& lv = plan.levels[level];
      at[n] = {level, static_cast<std::int64_t>(lv.tokens.size())};
      lv.tokens.push_back(tree.token[n]);
      lv.from.resize(level);
      edge_parents[level].resize(level);
      for (int c : tree.children[n]) {
        lv.from[at[c].level].push_back(at[c].pos);
        edge_parents[level][at[c].level].push_back(at[n].pos);
      }
    }
  }
  for (std::size_t l = 0; l < plan.levels.size(); ++l)
    for (const auto& p : edge_parents[l])
      plan.levels[l].parents.insert(plan.levels[l].parents.end(), p.begin(), p.end());
  // Roots are gathered level by level; root_order puts them back in tree order.
  plan.roots.resize(plan.levels.size());
  std::vector<std::int64_t> first(plan.levels.size(), 0);
  for (const auto& at : places) ++first[at.back().level];
  for (std::size_t l = 1, sum = first[0]; l < first.size(); ++l) {
    const std::int64_t n = first[l];
    first[l] = static_cast<std::int64_t>(sum);
    sum += static_cast<std::size_t>(n);
  }
  first[0] = 0;
  for (const auto& at : places) {
    const Place root = at.back();
    plan.root_order.push_back(first[root.level] +
                              static_cast<std::int64_t>(plan.roots[root.level].size()));
    plan.roots[root.level].push_back(root.pos);
  }
  return plan;
}

}  // namespace

TreeLSTM::TreeLSTM(TreeLSTMOptions options) : Module("TreeLSTM"), options_(options) {
  REMAT_CHECK(options.vocabulary > 0 && options.embedding_dim > 0 && options.hidden > 0 &&
                  options.classes > 0,
              "TreeLSTM: sizes must be positive (vocabulary {}, embedding {}, hidden {}, "
              "classes {})",
              options.vocabulary, options.embedding_dim, options.hidden, options.classes);
  const std::int64_t e = options.embedding_dim, h = options.hidden;
  embed_ = register_module("embedding", std::make_shared<nn::Embedding>(options.vocabulary, e));
  // Input, output and update gates from the input and the children's summed hidden state; the
  // forget gate per child from the input and that child's hidden state.
  w_iou_ = register_module("w_iou", std::make_shared<nn::Linear>(e, 3 * h));
  u_iou_ = register_module("u_iou", std::make_shared<nn::Linear>(h, 3 * h, false));
  w_f_ = register_module("w_f", std::make_shared<nn::Linear>(e, h));
  u_f_ = register_module("u_f", std::make_shared<nn::Linear>(h, h, false));
  head_ = register_module("head", std::make_shared<nn::Linear>(h, options.classes));
}

Tensor TreeLSTM::encode(std::span<const listops::Tree> trees) {
  const LevelPlan plan = plan_levels(trees);
  const std::int64_t h = options_.hidden;
  std::vector<Tensor> hs, cs;  // per level
  for (const auto& lv : plan.levels) {
    const auto n = static_cast<std::int64_t>(lv.tokens.size());
    for (std::int64_t tok : lv.tokens)
      REMAT_CHECK(tok >= 0 && tok < options_.vocabulary,
                  "TreeLSTM: token {} outside the vocabulary of {}", tok, options_.vocabulary);
    const Tensor x = embed_->forward(tensor(lv.tokens));
    Tensor iou = w_iou_->forward(x);
    Tensor c_children;
    if (!lv.parents.empty()) {
      std::vector<Tensor> child_h, child_c;
      for (std::size_t k = 0; k < lv.from.size(); ++k) {
        if (lv.from[k].empty()) continue;
        const Tensor rows = tensor(lv.from[k]);
        child_h.push_back(index_select(hs[k], 0, rows));
        child_c.push_back(index_select(cs[k], 0, rows));
      }
      const Tensor ch = child_h.size() == 1 ? child_h[0] : cat(child_h, 0);
      const Tensor cc = child_c.size() == 1 ? child_c[0] : cat(child_c, 0);
      const Tensor parents = tensor(lv.parents);
      iou = add(iou, u_iou_->forward(index_add(zeros({n, h}), 0, parents, ch)));
      const Tensor f = sigmoid(add(index_select(w_f_->forward(x), 0, parents), u_f_->forward(ch)));
      c_children = index_add(zeros({n, h}), 0, parents, mul(f, cc));
    }
    const Tensor i = sigmoid(narrow(iou, 1, 0, h));
    const Tensor o = sigmoid(narrow(iou, 1, h, h));
    const Tensor u = tanh(narrow(iou, 1, 2 * h, h));
    Tensor c = mul(i, u);
    if (c_children.defined()) c = add(c, c_children);
    hs.push_back(mul(o, tanh(c)));
    cs.push_back(std::move(c));
  }
  std::vector<Tensor> roots;
  for (std::size_t l = 0; l < plan.roots.size(); ++l)
    if (!plan.roots[l].empty()) roots.push_back(index_select(hs[l], 0, tensor(plan.roots[l])));
  const Tensor by_level = roots.size() == 1 ? roots[0] : cat(roots, 0);
  return index_select(by_level, 0, tensor(plan.root_order));
}

Tensor TreeLSTM::logits(std::span<const listops::Tree> trees) {
  return head_->forward(encode(trees));
}

}  // namespace remat::models
