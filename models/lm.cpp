#include "models/lm.h"

#include "core/error.h"
#include "ops/dropout.h"
#include "ops/loss.h"
#include "ops/view.h"

namespace remat::models {
namespace {

void check_tokens(const char* model, const Tensor& tokens, std::int64_t max_length) {
  REMAT_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.dtype() == DType::Int64,
              "{}: expected int64 token ids [batch, seq], got {}", model,
              tokens.defined() ? fmt::format("{} {}", dtype_name(tokens.dtype()), tokens.shape())
                               : std::string("an undefined tensor"));
  REMAT_CHECK(tokens.size(1) >= 1 && tokens.size(1) <= max_length,
              "{}: sequence length {} is outside [1, {}]", model, tokens.size(1), max_length);
}

}  // namespace

Tensor language_model_loss(const Tensor& logits, const Tensor& targets) {
  REMAT_CHECK(logits.defined() && targets.defined() && logits.dim() == 3 && targets.dim() == 2 &&
                  logits.size(0) == targets.size(0) && logits.size(1) == targets.size(1),
              "language_model_loss: expected logits [batch, seq, vocabulary] and targets "
              "[batch, seq], got {} and {}",
              logits.defined() ? logits.shape() : Shape{},
              targets.defined() ? targets.shape() : Shape{});
  return cross_entropy(reshape(logits, {-1, logits.size(2)}), reshape(targets, {-1}));
}

LstmLm::LstmLm(LstmLmOptions options) : Module("LstmLm"), options_(options) {
  const auto& o = options_;
  REMAT_CHECK(o.vocabulary >= 1 && o.embedding_dim >= 1 && o.hidden >= 1 && o.layers >= 1,
              "LstmLm: vocabulary {}, embedding_dim {}, hidden {} and layers {} must be positive",
              o.vocabulary, o.embedding_dim, o.hidden, o.layers);
  REMAT_CHECK(o.dropout >= 0 && o.dropout < 1, "LstmLm: dropout {} is outside [0, 1)", o.dropout);
  embedding_ =
      register_module("embedding", std::make_shared<nn::Embedding>(o.vocabulary, o.embedding_dim));
  lstm_ = register_module("lstm",
                          std::make_shared<nn::LSTM>(nn::RNNOptions{.input_size = o.embedding_dim,
                                                                    .hidden_size = o.hidden,
                                                                    .num_layers = o.layers,
                                                                    .batch_first = true,
                                                                    .dropout = o.dropout}));
  head_ = register_module("head", std::make_shared<nn::Linear>(o.hidden, o.vocabulary));
}

Tensor LstmLm::logits(const Tensor& tokens) {
  check_tokens("LstmLm", tokens, INT64_MAX);
  const bool train = is_training();
  Tensor x = dropout(embedding_->forward(tokens), options_.dropout, train);
  x = lstm_->forward(x, std::nullopt).output;
  return head_->forward(dropout(x, options_.dropout, train));
}

Tensor LstmLm::loss(const Tensor& tokens, const Tensor& targets) {
  return language_model_loss(logits(tokens), targets);
}

TransformerLm::TransformerLm(TransformerLmOptions options)
    : Module("TransformerLm"), options_(options) {
  const auto& o = options_;
  REMAT_CHECK(o.vocabulary >= 1 && o.d_model >= 1 && o.layers >= 1 && o.max_length >= 1,
              "TransformerLm: vocabulary {}, d_model {}, layers {} and max_length {} must be "
              "positive",
              o.vocabulary, o.d_model, o.layers, o.max_length);
  embedding_ =
      register_module("embedding", std::make_shared<nn::Embedding>(o.vocabulary, o.d_model));
  positions_ = register_module(
      "positions", std::make_shared<nn::LearnedPositionalEmbedding>(o.max_length, o.d_model));
  nn::TransformerEncoderLayerOptions layer;
  layer.d_model = o.d_model;
  layer.nhead = o.heads;
  layer.dim_feedforward = o.feedforward;
  layer.dropout = o.dropout;
  layer.activation = o.activation;
  layer.batch_first = true;
  layer.norm_first = o.norm_first;
  layer.feedforward_chunk = o.feedforward_chunk;
  encoder_ = register_module(
      "encoder", std::make_shared<nn::TransformerEncoder>(nn::TransformerEncoderOptions{
                     .layer = layer, .num_layers = o.layers, .final_norm = o.norm_first}));
  head_ = register_module("head", std::make_shared<nn::Linear>(o.d_model, o.vocabulary));
}

Tensor TransformerLm::logits(const Tensor& tokens) {
  check_tokens("TransformerLm", tokens, options_.max_length);
  Tensor x = positions_->forward(embedding_->forward(tokens));
  x = dropout(x, options_.dropout, is_training());
  x = encoder_->forward(x, nn::causal_mask(tokens.size(1)), Tensor(), /*is_causal=*/true);
  return head_->forward(x);
}

Tensor TransformerLm::loss(const Tensor& tokens, const Tensor& targets) {
  return language_model_loss(logits(tokens), targets);
}

}  // namespace remat::models
