// Attention and Transformer encoder layers with PyTorch's parameter names, shapes and
// initialisation (torch.nn.MultiheadAttention, TransformerEncoderLayer, TransformerEncoder), so
// a converted PyTorch state dict loads into them, and a learned positional embedding.
// Masks follow PyTorch: a floating-point mask is added to the attention scores (-inf forbids);
// an int64 mask forbids where it is non-zero (PyTorch's bool masks, True = not allowed).
// Usage: nn::TransformerEncoderLayer layer({.d_model = 256, .nhead = 4, .dim_feedforward = 1024,
//                                           .batch_first = true});
//        Tensor y = layer.forward(x, nn::causal_mask(x.size(1)), Tensor());
#pragma once
#include <cstdint>
#include <memory>

#include "nn/layers.h"
#include "nn/module.h"
#include "nn/module_list.h"

namespace remat::nn {

// [size, size] float mask with -inf above the diagonal and 0 elsewhere: position i attends to
// positions <= i (torch.nn.Transformer.generate_square_subsequent_mask).
Tensor causal_mask(std::int64_t size, DType dtype = DType::Float32);

// softmax(q k^T / sqrt(head_dim) + mask) v over [..., L, head_dim] queries and [..., S, head_dim]
// keys and values; `mask` (optional) broadcasts to [..., L, S], float (added) or int64
// (non-zero forbids); dropout on the attention weights in training.  Returns the output and,
// when asked, the weights.
struct AttentionResult {
  Tensor output, weights;
};
// is_causal: query i attends to keys 0..i only, on top of `mask` (ops/attention.h).
AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const Tensor& mask = Tensor(), double dropout_p = 0,
                                             bool training = false, bool need_weights = false,
                                             bool is_causal = false);

struct MultiheadAttentionOptions {
  std::int64_t embed_dim = 0;
  std::int64_t num_heads = 1;
  double dropout = 0;  // on the attention weights, in training
  bool bias = true;
  bool batch_first = false;  // [batch, seq, embed] instead of [seq, batch, embed]
  DType dtype = DType::Float32;
};

struct AttentionMasks {
  Tensor key_padding_mask{};  // [batch, S]: int64 non-zero or float added, per key
  Tensor attn_mask{};         // [L, S] or [batch * num_heads, L, S]
  bool need_weights = true;
  bool average_attn_weights = true;  // weights [batch, L, S] averaged over heads
  // PyTorch's hint that attn_mask is the causal mask: without weights, the fused attention then
  // skips the forbidden scores instead of adding the mask (the result is the same).
  bool is_causal = false;
};

struct MultiheadAttentionOutput {
  Tensor output;   // the query's layout, embed_dim features
  Tensor weights;  // [batch, L, S] (or [batch, heads, L, S]); undefined unless need_weights
};

// in_proj_weight [3E, E] (xavier_uniform), in_proj_bias [3E] (zeros), out_proj (Linear E -> E,
// bias zeros).  Keys and values have embed_dim features (PyTorch's kdim = vdim = embed_dim).
// Unbatched inputs [seq, embed] give unbatched outputs.
class MultiheadAttention : public Module {
 public:
  explicit MultiheadAttention(MultiheadAttentionOptions options);
  MultiheadAttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const AttentionMasks& masks = {});
  // Self-attention without masks.
  Tensor forward(const Tensor& x) override {
    AttentionMasks masks;
    masks.need_weights = false;
    return forward(x, x, x, masks).output;
  }
  void reset_parameters();
  const MultiheadAttentionOptions& options() const { return options_; }

 private:
  MultiheadAttentionOptions options_;
  std::shared_ptr<Linear> out_proj_;
};

enum class Activation { ReLU, GELU };

struct TransformerEncoderLayerOptions {
  std::int64_t d_model = 0;
  std::int64_t nhead = 1;
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  Activation activation = Activation::ReLU;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  // Layer norm before attention and feed-forward (pre-norm) instead of after the residual adds.
  bool norm_first = false;
  DType dtype = DType::Float32;
  // Rows (positions of all sequences) per chunk of the feed-forward block, whose chunks' outputs
  // are joined by one cat; 0: as many as make about 2 MiB of its hidden activation.  Under a
  // budget each chunk's hidden values are evicted and rebuilt alone, and a call holds one
  // chunk's.  The same result whatever the chunk, as Hugging Face's chunk_size_feed_forward.
  std::int64_t feedforward_chunk = 0;
};

// Self-attention and a feed-forward block, each with a residual connection and layer norm:
// post-norm x = norm1(x + sa(x)); x = norm2(x + ff(x)); pre-norm x = x + sa(norm1(x));
// x = x + ff(norm2(x)).  Submodules self_attn, linear1, linear2, norm1, norm2.
class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(TransformerEncoderLayerOptions options);
  // is_causal: src_mask is the causal mask (PyTorch's hint; see AttentionMasks).
  Tensor forward(const Tensor& src, const Tensor& src_mask,
                 const Tensor& src_key_padding_mask = Tensor(), bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor(), Tensor()); }
  void reset_parameters();
  const TransformerEncoderLayerOptions& options() const { return options_; }

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask, const Tensor& padding,
                              bool is_causal);
  Tensor feed_forward_block(const Tensor& x);

  TransformerEncoderLayerOptions options_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
};

struct TransformerEncoderOptions {
  TransformerEncoderLayerOptions layer;
  std::int64_t num_layers = 1;
  bool final_norm = false;  // a LayerNorm "norm" after the last layer (PyTorch's norm=)
};

// num_layers copies of one layer ("layers.0", "layers.1", ...): as PyTorch's deep copy, every
// layer starts from the same initial parameters.
class TransformerEncoder : public Module {
 public:
  explicit TransformerEncoder(TransformerEncoderOptions options);
  Tensor forward(const Tensor& src, const Tensor& mask,
                 const Tensor& src_key_padding_mask = Tensor(), bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor(), Tensor()); }
  const ModuleList& layers() const { return *layers_; }
  // The layer at `index` (bounds-checked).
  std::shared_ptr<TransformerEncoderLayer> layer(std::size_t index) const {
    return layers_->at<TransformerEncoderLayer>(index);
  }
  const TransformerEncoderOptions& options() const { return options_; }

 private:
  TransformerEncoderOptions options_;
  std::shared_ptr<ModuleList> layers_;
  std::shared_ptr<LayerNorm> norm_;
};

// A learned position table: forward(x [..., seq, dim]) returns x + weight[0:seq] (broadcast
// over the leading dims).  weight [max_length, dim]: normal(0, 1), as an nn.Embedding of
// positions in PyTorch.
class LearnedPositionalEmbedding : public Module {
 public:
  LearnedPositionalEmbedding(std::int64_t max_length, std::int64_t dim,
                             DType dtype = DType::Float32);
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::int64_t max_length() const { return max_length_; }

 private:
  std::int64_t max_length_, dim_;
};

}  // namespace remat::nn
