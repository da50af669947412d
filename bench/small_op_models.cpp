#include "bench/small_op_models.h"

#include <chrono>
#include <cstdint>
#include <vector>

namespace remat::bench {
namespace {

Tensor param(const Shape& shape, double bound, std::uint64_t seed) {
  return uniform(shape, -bound, bound, {.requires_grad = true, .seed = seed});
}

// The LCG of compare_torch.py (Knuth's MMIX constants), top bits for draws.
struct Lcg {
  std::uint64_t s;
  std::uint64_t next(std::uint64_t n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (s >> 33) % n;
  }
};

// A binary tree in post-order: leaves carry a token, internal nodes their children's indices.
struct TreeNode {
  int left = -1, right = -1;
  std::int64_t token = 0;
};

int build(Lcg& rng, std::int64_t leaves, std::vector<TreeNode>& out) {
  if (leaves == 1) {
    out.push_back({-1, -1, static_cast<std::int64_t>(rng.next(100))});
    return static_cast<int>(out.size()) - 1;
  }
  const auto k = static_cast<std::int64_t>(1 + rng.next(static_cast<std::uint64_t>(leaves - 1)));
  const int l = build(rng, k, out);
  const int r = build(rng, leaves - k, out);
  out.push_back({l, r, 0});
  return static_cast<int>(out.size()) - 1;
}

}  // namespace

double SmallOpModel::step() {
  const auto t0 = std::chrono::steady_clock::now();
  {
    // The last step's gradients go before the forward, so they take no memory while it runs.
    optimizer->zero_grad();
    Tensor l = loss();
    backward(l);
    (void)l.item<float>();
  }
  optimizer->step();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

SmallOpModel lstm_cell_model() {
  constexpr std::int64_t kIn = 128, kHidden = 128, kSteps = 50, kBatch = 64;
  const double bound = 1.0 / std::sqrt(static_cast<double>(kHidden));
  SmallOpModel m;
  Tensor w_ih = param({4 * kHidden, kIn}, bound, 11),
         w_hh = param({4 * kHidden, kHidden}, bound, 12);
  Tensor b = param({4 * kHidden}, bound, 13);
  Tensor w_out = param({10, kHidden}, bound, 14), b_out = param({10}, bound, 15);
  m.params = {w_ih, w_hh, b, w_out, b_out};
  const Tensor xs = randn({kSteps, kBatch, kIn}, {.seed = 16});
  const Tensor targets = randint(0, 10, {kBatch}, {.seed = 17});
  m.loss = [=] {
    Tensor h = zeros({kBatch, kHidden}), c = zeros({kBatch, kHidden});
    for (std::int64_t t = 0; t < kSteps; ++t) {
      Tensor gates = add(linear(select(xs, 0, t), w_ih, b), matmul(h, transpose(w_hh, 0, 1)));
      auto g = chunk(gates, 4, 1);
      c = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));
      h = mul(sigmoid(g[3]), tanh(c));
    }
    return cross_entropy(linear(h, w_out, b_out), targets);
  };
  m.optimizer = std::make_unique<nn::Adam>(m.params, nn::AdamOptions{.lr = 1e-3});
  return m;
}

SmallOpModel treelstm_model() {
  constexpr std::int64_t kHidden = 64, kVocab = 100, kTrees = 16;
  const double bound = 1.0 / std::sqrt(static_cast<double>(kHidden));
  SmallOpModel m;
  Tensor emb = param({kVocab, kHidden}, 1.0, 21);
  Tensor w_leaf = param({3 * kHidden, kHidden}, bound, 22),
         b_leaf = param({3 * kHidden}, bound, 23);
  Tensor u = param({5 * kHidden, 2 * kHidden}, bound, 24), b_node = param({5 * kHidden}, bound, 25);
  Tensor w_out = param({5, kHidden}, bound, 26), b_out = param({5}, bound, 27);
  m.params = {emb, w_leaf, b_leaf, u, b_node, w_out, b_out};
  auto trees = std::make_shared<std::vector<std::vector<TreeNode>>>();
  auto labels = std::make_shared<std::vector<std::int64_t>>();
  Lcg rng{2024};
  for (std::int64_t i = 0; i < kTrees; ++i) {
    std::vector<TreeNode> nodes;
    build(rng, static_cast<std::int64_t>(2 + rng.next(70)), nodes);
    trees->push_back(std::move(nodes));
    labels->push_back(static_cast<std::int64_t>(rng.next(5)));
  }
  m.loss = [=] {
    Tensor total;
    for (std::size_t i = 0; i < trees->size(); ++i) {
      const auto& nodes = (*trees)[i];
      std::vector<Tensor> h(nodes.size()), c(nodes.size());
      for (std::size_t n = 0; n < nodes.size(); ++n) {
        const TreeNode& node = nodes[n];
        if (node.left < 0) {
          Tensor x = embedding(emb, tensor<std::int64_t>({node.token}, Shape{1}));
          auto g = chunk(linear(x, w_leaf, b_leaf), 3, 1);  // i, o, u
          c[n] = mul(sigmoid(g[0]), tanh(g[2]));
          h[n] = mul(sigmoid(g[1]), tanh(c[n]));
        } else {
          Tensor hc = cat({h[node.left], h[node.right]}, 1);
          auto g = chunk(linear(hc, u, b_node), 5, 1);  // i, f_left, f_right, o, u
          c[n] = add(add(mul(sigmoid(g[0]), tanh(g[4])), mul(sigmoid(g[1]), c[node.left])),
                     mul(sigmoid(g[2]), c[node.right]));
          h[n] = mul(sigmoid(g[3]), tanh(c[n]));
        }
      }
      Tensor logits = linear(h.back(), w_out, b_out);
      Tensor l = cross_entropy(logits, tensor<std::int64_t>({(*labels)[i]}, Shape{1}));
      total = total.defined() ? add(total, l) : l;
    }
    return div(total, static_cast<double>(trees->size()));
  };
  m.optimizer = std::make_unique<nn::Adam>(m.params, nn::AdamOptions{.lr = 1e-3});
  return m;
}

}  // namespace remat::bench
