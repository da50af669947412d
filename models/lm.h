// Two character-level language models over int64 token ids [batch, seq]: an LSTM LM
// (embedding, a stack of LSTM layers, a linear head) and a causal Transformer LM (embedding plus
// learned positions, encoder layers under a causal mask, a linear head).  Parameter names are
// PyTorch's for the same modules, so a state dict converted by tools/torch_to_remat.py loads.
// Usage: models::LstmLm lm({.vocabulary = 256, .embedding_dim = 256, .hidden = 256});
//        Tensor logits = lm.logits(tokens);  // [batch, seq, vocabulary]
//        Tensor loss = lm.loss(tokens, targets);
#pragma once
#include <cstdint>
#include <memory>

#include "nn/layers.h"
#include "nn/module.h"
#include "nn/rnn.h"
#include "nn/text.h"
#include "nn/transformer.h"

namespace remat::models {

struct LstmLmOptions {
  std::int64_t vocabulary = nn::kByteVocabulary;
  std::int64_t embedding_dim = 256;
  std::int64_t hidden = 256;
  std::int64_t layers = 1;
  // On the embedding's output, between LSTM layers and before the head, in training.
  double dropout = 0;
};

// Submodules "embedding", "lstm" (batch_first), "head".
class LstmLm : public nn::Module {
 public:
  explicit LstmLm(LstmLmOptions options = {});
  Tensor logits(const Tensor& tokens);
  Tensor forward(const Tensor& tokens) override { return logits(tokens); }
  // Mean cross entropy of the next-token predictions against `targets` [batch, seq].
  Tensor loss(const Tensor& tokens, const Tensor& targets);
  const LstmLmOptions& options() const { return options_; }

 private:
  LstmLmOptions options_;
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::LSTM> lstm_;
  std::shared_ptr<nn::Linear> head_;
};

struct TransformerLmOptions {
  std::int64_t vocabulary = nn::kByteVocabulary;
  std::int64_t d_model = 256;
  std::int64_t heads = 4;
  std::int64_t feedforward = 1024;
  std::int64_t layers = 4;
  std::int64_t max_length = 128;  // the longest sequence the position table covers
  double dropout = 0;             // inside every encoder layer and on the input embedding
  nn::Activation activation = nn::Activation::ReLU;
  bool norm_first = false;  // pre-norm layers (then a final LayerNorm "encoder.norm" too)
  // Rows per chunk of each layer's feed-forward block (0: about 2 MiB of its hidden activation;
  // see nn::TransformerEncoderLayerOptions::feedforward_chunk).
  std::int64_t feedforward_chunk = 0;
};

// Submodules "embedding", "positions" (weight [max_length, d_model]), "encoder" (layers
// "encoder.layers.<i>", batch_first), "head".
class TransformerLm : public nn::Module {
 public:
  explicit TransformerLm(TransformerLmOptions options = {});
  Tensor logits(const Tensor& tokens);
  Tensor forward(const Tensor& tokens) override { return logits(tokens); }
  Tensor loss(const Tensor& tokens, const Tensor& targets);
  const TransformerLmOptions& options() const { return options_; }

 private:
  TransformerLmOptions options_;
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::LearnedPositionalEmbedding> positions_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::Linear> head_;
};

// Mean next-token cross entropy of logits [batch, seq, vocabulary] against targets [batch, seq].
Tensor language_model_loss(const Tensor& logits, const Tensor& targets);

}  // namespace remat::models
