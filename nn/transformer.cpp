#include "nn/transformer.h"

#include <cmath>
#include <limits>

#include "nn/init.h"
#include "remat.h"

namespace remat::nn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A mask as the float added to the scores: int64 masks give -inf where non-zero.
Tensor additive_mask(const Tensor& mask, DType dtype) {
  if (mask.dtype() != DType::Int64) return mask;
  return masked_fill(zeros(mask.shape(), {.dtype = dtype}), mask, -kInf);
}

void check_mask(std::string_view what, const Tensor& mask, DType dtype) {
  REMAT_CHECK(mask.dtype() == DType::Int64 || mask.dtype() == dtype,
              "MultiheadAttention: {} must be int64 (non-zero forbids) or {} (added), got {}", what,
              dtype, mask.dtype());
}

// [batch, seq, embed] -> [batch, heads, seq, head_dim]
Tensor split_heads(const Tensor& x, std::int64_t heads) {
  return permute(reshape(x, {x.size(0), x.size(1), heads, x.size(2) / heads}), {0, 2, 1, 3});
}

}  // namespace

Tensor causal_mask(std::int64_t size, DType dtype) {
  REMAT_CHECK(size > 0, "causal_mask: size must be positive, got {}", size);
  return triu(full({size, size}, -kInf, {.dtype = dtype}), 1);
}

AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const Tensor& mask, double dropout_p, bool training,
                                             bool need_weights, bool is_causal) {
  REMAT_CHECK(q.defined() && k.defined() && v.defined(),
              "scaled_dot_product_attention: an input is an undefined tensor");
  REMAT_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim() &&
                  k.size(-1) == q.size(-1) && v.size(-2) == k.size(-2),
              "scaled_dot_product_attention: queries {}, keys {} and values {} do not match "
              "([..., L, d], [..., S, d], [..., S, dv])",
              q.shape(), k.shape(), v.shape());
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  // Without the weights, one fused op that never stores them (ops/attention.h).
  if (!need_weights && !(mask.defined() && mask.requires_grad()))
    return {attention(q, k, v, mask, scale, dropout_p, training, is_causal), Tensor()};
  // Scaling the queries first (as PyTorch) costs L x d multiplies instead of L x S.
  Tensor scores = matmul(mul(q, scale), transpose(k, -2, -1));
  if (mask.defined())
    scores = mask.dtype() == DType::Int64 ? masked_fill(scores, mask, -kInf) : add(scores, mask);
  if (is_causal) scores = add(scores, causal_mask(q.size(-2), q.dtype()));
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0 && training) weights = dropout(weights, dropout_p, true);
  return {matmul(weights, v), need_weights ? weights : Tensor()};
}

// ---------------------------------------------------------------- MultiheadAttention

MultiheadAttention::MultiheadAttention(MultiheadAttentionOptions options)
    : Module("MultiheadAttention"), options_(options) {
  const auto& o = options_;
  REMAT_CHECK(o.embed_dim > 0 && o.num_heads > 0 && o.embed_dim % o.num_heads == 0,
              "MultiheadAttention: embed_dim ({}) must be a positive multiple of num_heads ({})",
              o.embed_dim, o.num_heads);
  REMAT_CHECK(o.dropout >= 0 && o.dropout <= 1,
              "MultiheadAttention: dropout must be in [0, 1], got {}", o.dropout);
  const TensorOptions t{.dtype = o.dtype};
  register_parameter("in_proj_weight", zeros({3 * o.embed_dim, o.embed_dim}, t));
  if (o.bias) register_parameter("in_proj_bias", zeros({3 * o.embed_dim}, t));
  out_proj_ = register_module("out_proj",
                              std::make_shared<Linear>(LinearOptions{.in_features = o.embed_dim,
                                                                     .out_features = o.embed_dim,
                                                                     .bias = o.bias,
                                                                     .dtype = o.dtype}));
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(param("in_proj_weight"));
  out_proj_->reset_parameters();
  if (options_.bias) {
    init::zeros_(param("in_proj_bias"));
    init::zeros_(out_proj_->param("bias"));
  }
}

MultiheadAttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                     const Tensor& value,
                                                     const AttentionMasks& masks) {
  const auto& o = options_;
  REMAT_CHECK(query.defined() && key.defined() && value.defined(),
              "MultiheadAttention: query, key or value is an undefined tensor");
  const bool batched = query.dim() == 3;
  for (const Tensor* t : {&query, &key, &value})
    REMAT_CHECK(t->dim() == query.dim() && (t->dim() == 2 || t->dim() == 3) &&
                    t->size(-1) == o.embed_dim && t->dtype() == o.dtype,
                "MultiheadAttention(embed_dim={}, batch_first={}): query, key and value must "
                "all be [seq, batch, {}] ([batch, seq, {}] with batch_first, [seq, {}] "
                "unbatched) of {}, got shapes {}, {} and {}",
                o.embed_dim, o.batch_first, o.embed_dim, o.embed_dim, o.embed_dim, o.dtype,
                query.shape(), key.shape(), value.shape());
  // Everything below runs batch-first: [batch, seq, embed].
  auto batch_first = [&](const Tensor& t) {
    if (!batched) return unsqueeze(t, 0);
    return o.batch_first ? t : transpose(t, 0, 1);
  };
  const Tensor qb = batch_first(query), kb = batch_first(key), vb = batch_first(value);
  const std::int64_t batch = qb.size(0), L = qb.size(1), S = kb.size(1), E = o.embed_dim,
                     heads = o.num_heads;
  REMAT_CHECK(kb.size(0) == batch && vb.size(0) == batch && vb.size(1) == S,
              "MultiheadAttention: query {}, key {} and value {} disagree on batch or key length",
              query.shape(), key.shape(), value.shape());
  const Tensor w = param("in_proj_weight"), b = o.bias ? param("in_proj_bias") : Tensor();
  Tensor q, k, v;
  if (same(query, key) && same(key, value)) {  // self-attention: one projection GEMM
    const auto qkv = chunk(linear(qb, w, b), 3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    const auto w3 = chunk(w, 3, 0);
    const auto b3 = o.bias ? chunk(b, 3, 0) : std::vector<Tensor>(3);
    q = linear(qb, w3[0], b3[0]), k = linear(kb, w3[1], b3[1]), v = linear(vb, w3[2], b3[2]);
  }

  // The causal hint stands for attn_mask in the fused op (it is that mask), which then skips
  // the forbidden scores; the weights, when asked for, come from the masks themselves.
  const bool causal = masks.is_causal && !masks.need_weights && L == S;
  Tensor mask;  // broadcasts to [batch, heads, L, S]
  if (masks.attn_mask.defined()) {
    const Tensor& m = masks.attn_mask;
    check_mask("attn_mask", m, o.dtype);
    const bool ok = m.shape() == Shape{L, S} || m.shape() == Shape{batch * heads, L, S};
    REMAT_CHECK(ok,
                "MultiheadAttention: attn_mask must be [{}, {}] or [{}, {}, {}] (batch * heads, "
                "L, S), got {}",
                L, S, batch * heads, L, S, m.shape());
    if (!causal) mask = m.dim() == 2 ? m : reshape(m, {batch, heads, L, S});
  }
  if (masks.key_padding_mask.defined()) {
    const Tensor& m = masks.key_padding_mask;
    check_mask("key_padding_mask", m, o.dtype);
    const Shape expected = batched ? Shape{batch, S} : Shape{S};
    REMAT_CHECK(m.shape() == expected, "MultiheadAttention: key_padding_mask must be {}, got {}",
                expected, m.shape());
    const Tensor pad = reshape(m, {batch, 1, 1, S});
    mask = mask.defined() ? add(additive_mask(mask, o.dtype), additive_mask(pad, o.dtype)) : pad;
  }

  const AttentionResult r = scaled_dot_product_attention(
      split_heads(q, heads), split_heads(k, heads), split_heads(v, heads), mask, o.dropout,
      is_training(), masks.need_weights, causal);
  Tensor out = out_proj_->forward(reshape(permute(r.output, {0, 2, 1, 3}), {batch, L, E}));
  Tensor weights;
  if (masks.need_weights) {
    weights = masks.average_attn_weights ? mean(r.weights, {1}) : r.weights;
    if (!batched) weights = squeeze(weights, 0);
  }
  if (!batched) return {squeeze(out, 0), weights};
  return {o.batch_first ? out : transpose(out, 0, 1), weights};
}

// ---------------------------------------------------------------- TransformerEncoderLayer

TransformerEncoderLayer::TransformerEncoderLayer(TransformerEncoderLayerOptions options)
    : Module("TransformerEncoderLayer"), options_(options) {
  const auto& o = options_;
  REMAT_CHECK(o.dim_feedforward > 0,
              "TransformerEncoderLayer: dim_feedforward must be positive, "
              "got {}",
              o.dim_feedforward);
  REMAT_CHECK(o.dropout >= 0 && o.dropout <= 1,
              "TransformerEncoderLayer: dropout must be in [0, 1], got {}", o.dropout);
  REMAT_CHECK(o.feedforward_chunk >= 0,
              "TransformerEncoderLayer: feedforward_chunk must be 0 (automatic) or positive, "
              "got {}",
              o.feedforward_chunk);
  self_attn_ = register_module(
      "self_attn",
      std::make_shared<MultiheadAttention>(MultiheadAttentionOptions{.embed_dim = o.d_model,
                                                                     .num_heads = o.nhead,
                                                                     .dropout = o.dropout,
                                                                     .batch_first = o.batch_first,
                                                                     .dtype = o.dtype}));
  linear1_ = register_module(
      "linear1",
      std::make_shared<Linear>(LinearOptions{
          .in_features = o.d_model, .out_features = o.dim_feedforward, .dtype = o.dtype}));
  linear2_ = register_module(
      "linear2",
      std::make_shared<Linear>(LinearOptions{
          .in_features = o.dim_feedforward, .out_features = o.d_model, .dtype = o.dtype}));
  auto norm = [&] {
    return std::make_shared<LayerNorm>(LayerNormOptions{
        .normalized_shape = {o.d_model}, .eps = o.layer_norm_eps, .dtype = o.dtype});
  };
  norm1_ = register_module("norm1", norm());
  norm2_ = register_module("norm2", norm());
}

void TransformerEncoderLayer::reset_parameters() {
  self_attn_->reset_parameters();
  linear1_->reset_parameters();
  linear2_->reset_parameters();
  norm1_->reset_parameters();
  norm2_->reset_parameters();
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& mask,
                                                     const Tensor& padding, bool is_causal) {
  AttentionMasks masks;
  masks.key_padding_mask = padding;
  masks.attn_mask = mask;
  masks.need_weights = false;
  masks.is_causal = is_causal;
  const Tensor a = self_attn_->forward(x, x, x, masks).output;
  return dropout(a, options_.dropout, is_training());
}

// Row chunks (TransformerEncoderLayerOptions::feedforward_chunk): whole, the default LM's
// feed-forward block held its 8 MiB hidden activation, that activation's output and their
// gradients in single calls, and 0.3 of the LM's peak was infeasible.
Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  auto block = [&](const Tensor& part) {
    Tensor h = linear1_->forward(part);
    h = options_.activation == Activation::GELU ? gelu(h) : relu(h);
    h = linear2_->forward(dropout(h, options_.dropout, is_training()));
    return dropout(h, options_.dropout, is_training());
  };
  constexpr std::int64_t kChunkBytes = std::int64_t{2} << 20;
  const std::int64_t width = options_.d_model, rows = x.numel() / width;
  const std::int64_t chunk_rows =
      options_.feedforward_chunk > 0
          ? options_.feedforward_chunk
          : std::max<std::int64_t>(
                1, kChunkBytes / (options_.dim_feedforward *
                                  static_cast<std::int64_t>(element_size(x.dtype()))));
  if (rows <= chunk_rows) return block(x);
  std::vector<Tensor> outs;
  for (const Tensor& part : split(reshape(x, {rows, width}), chunk_rows, 0))
    outs.push_back(block(part));
  return reshape(cat(outs, 0), x.shape());
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask, bool is_causal) {
  Tensor x = src;
  if (options_.norm_first) {
    x = add(x, self_attention_block(norm1_->forward(x), src_mask, src_key_padding_mask, is_causal));
    return add(x, feed_forward_block(norm2_->forward(x)));
  }
  x = norm1_->forward(add(x, self_attention_block(x, src_mask, src_key_padding_mask, is_causal)));
  return norm2_->forward(add(x, feed_forward_block(x)));
}

// ---------------------------------------------------------------- TransformerEncoder

TransformerEncoder::TransformerEncoder(TransformerEncoderOptions options)
    : Module("TransformerEncoder"), options_(std::move(options)) {
  const auto& o = options_;
  REMAT_CHECK(o.num_layers >= 1, "TransformerEncoder: num_layers must be at least 1, got {}",
              o.num_layers);
  layers_ = register_module("layers", std::make_shared<ModuleList>());
  for (std::int64_t i = 0; i < o.num_layers; ++i)
    layers_->push_back(std::make_shared<TransformerEncoderLayer>(o.layer));
  // Copies of the first layer, as PyTorch's deep copies of the layer it is given.
  const auto first = (*layers_)[0]->named_parameters();
  NoGradGuard no_grad;
  for (std::size_t i = 1; i < layers_->size(); ++i) {
    const auto params = (*layers_)[i]->named_parameters();
    for (std::size_t p = 0; p < params.size(); ++p) copy_(params[p].second, first[p].second);
  }
  if (o.final_norm)
    norm_ = register_module(
        "norm", std::make_shared<LayerNorm>(LayerNormOptions{.normalized_shape = {o.layer.d_model},
                                                             .eps = o.layer.layer_norm_eps,
                                                             .dtype = o.layer.dtype}));
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask,
                                   const Tensor& src_key_padding_mask, bool is_causal) {
  Tensor x = src;
  for (std::size_t i = 0; i < layers_->size(); ++i)
    x = layer(i)->forward(x, mask, src_key_padding_mask, is_causal);
  return norm_ ? norm_->forward(x) : x;
}

// ---------------------------------------------------------------- LearnedPositionalEmbedding

LearnedPositionalEmbedding::LearnedPositionalEmbedding(std::int64_t max_length, std::int64_t dim,
                                                       DType dtype)
    : Module("LearnedPositionalEmbedding"), max_length_(max_length), dim_(dim) {
  REMAT_CHECK(max_length > 0 && dim > 0,
              "LearnedPositionalEmbedding: max_length and dim must be positive, got {} and {}",
              max_length, dim);
  REMAT_CHECK(is_floating(dtype), "LearnedPositionalEmbedding: dtype must be floating, got {}",
              dtype);
  register_parameter("weight", zeros({max_length, dim}, {.dtype = dtype}));
  reset_parameters();
}

void LearnedPositionalEmbedding::reset_parameters() {
  init::normal_(param("weight"), 0.0, 1.0);
}

Tensor LearnedPositionalEmbedding::forward(const Tensor& x) {
  REMAT_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == dim_ && x.size(-2) <= max_length_,
              "LearnedPositionalEmbedding(max_length={}, dim={}): expected [..., seq <= {}, {}], "
              "got shape {}",
              max_length_, dim_, max_length_, dim_, x.defined() ? x.shape() : Shape{});
  return add(x, slice(param("weight"), 0, 0, x.size(-2)));
}

}  // namespace remat::nn
