// Recurrent and attention modules against PyTorch (tests/fixtures/gen_seq.py, float64): every
// parameter name and shape, outputs and the gradients of every input and parameter; gradients
// and second derivatives of the fused LSTM cell against finite differences; checkpointing a
// Transformer layer; bad input errors.
#include <map>

#include "nn/rnn.h"
#include "nn/transformer.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::find_case;
using testing::FixtureCase;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::leaf64;
using testing::load_fixture;
using testing::throws_with;

const std::vector<FixtureCase>& cases() {
  static const auto c = load_fixture("seq");
  return c;
}

// Copies the case's "p:<name>" values into the module, checking both name sets agree.
void load_params(nn::Module& m, const FixtureCase& c) {
  std::size_t in_fixture = 0;
  for (const auto& [key, t] : c.tensors) in_fixture += key.rfind("p:", 0) == 0;
  const auto params = m.named_parameters();
  ASSERT_EQ(params.size(), in_fixture) << "parameter count differs from PyTorch's";
  NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    ASSERT_TRUE(c.tensors.count("p:" + name)) << "PyTorch has no parameter " << name;
    ASSERT_EQ(p.shape(), c["p:" + name].shape()) << name;
    copy_(p, c["p:" + name]);
  }
}

// A leaf copy of a fixture input, requiring grad.
Tensor input(const FixtureCase& c, const std::string& name) {
  return clone(c[name]).set_requires_grad(true);
}

// Compares outputs with the fixture, then backpropagates sum(out * w_out) and compares the
// gradients of the named inputs and of every parameter.
void check_against_torch(nn::Module& m, const FixtureCase& c,
                         const std::map<std::string, Tensor>& outputs,
                         const std::map<std::string, Tensor>& inputs) {
  Tensor loss;
  for (const auto& [name, out] : outputs) {
    SCOPED_TRACE("output " + name);
    EXPECT_TRUE(all_close(out, c[name], 1e-10, 1e-10));
    const Tensor term = sum(mul(out, c["w_out:" + name]));
    loss = loss.defined() ? add(loss, term) : term;
  }
  backward(loss);
  for (const auto& [name, t] : inputs) {
    SCOPED_TRACE("input " + name);
    EXPECT_TRUE(all_close(t.grad(), c["g_in:" + name], 1e-10, 1e-10));
  }
  for (const auto& [name, p] : m.named_parameters()) {
    SCOPED_TRACE("parameter " + name);
    EXPECT_TRUE(all_close(p.grad(), c["g:" + name], 1e-10, 1e-10));
  }
}

TEST(LSTMCell, MatchesPyTorch) {
  const auto& c = find_case(cases(), "lstm_cell");
  nn::LSTMCell cell({.input_size = 5, .hidden_size = 4, .dtype = DType::Float64});
  load_params(cell, c);
  const Tensor x = input(c, "x"), h0 = input(c, "h0"), c0 = input(c, "c0");
  const nn::LSTMState s = cell.forward(x, nn::LSTMState{h0, c0});
  check_against_torch(cell, c, {{"h", s.h}, {"c", s.c}}, {{"x", x}, {"h0", h0}, {"c0", c0}});
}

TEST(LSTM, TwoLayersBatchFirstWithInitialStateMatchPyTorch) {
  const auto& c = find_case(cases(), "lstm");
  nn::LSTM lstm({.input_size = 5,
                 .hidden_size = 4,
                 .num_layers = 2,
                 .batch_first = true,
                 .dtype = DType::Float64});
  load_params(lstm, c);
  const Tensor x = input(c, "x"), h0 = input(c, "h0"), c0 = input(c, "c0");
  const nn::LSTMOutput r = lstm.forward(x, nn::LSTMState{h0, c0});
  check_against_torch(lstm, c, {{"output", r.output}, {"h_n", r.h_n}, {"c_n", r.c_n}},
                      {{"x", x}, {"h0", h0}, {"c0", c0}});
}

// A case of an LSTM from a zero state, x its one input.
void check_lstm_from_zero_state(const std::string& name, const nn::RNNOptions& options) {
  const auto& c = find_case(cases(), name);
  nn::LSTM lstm(options);
  load_params(lstm, c);
  const Tensor x = input(c, "x");
  const nn::LSTMOutput r = lstm.forward(x, std::nullopt);
  check_against_torch(lstm, c, {{"output", r.output}, {"h_n", r.h_n}, {"c_n", r.c_n}}, {{"x", x}});
}

TEST(LSTM, SequenceFirstWithZeroStateMatchesPyTorch) {
  check_lstm_from_zero_state("lstm_seq_first",
                             {.input_size = 5, .hidden_size = 4, .dtype = DType::Float64});
}

TEST(GRUCell, MatchesPyTorch) {
  const auto& c = find_case(cases(), "gru_cell");
  nn::GRUCell cell({.input_size = 5, .hidden_size = 4, .dtype = DType::Float64});
  load_params(cell, c);
  const Tensor x = input(c, "x"), h0 = input(c, "h0");
  check_against_torch(cell, c, {{"h", cell.forward(x, h0)}}, {{"x", x}, {"h0", h0}});
}

TEST(GRU, TwoLayersBatchFirstMatchPyTorch) {
  const auto& c = find_case(cases(), "gru");
  nn::GRU gru({.input_size = 5,
               .hidden_size = 4,
               .num_layers = 2,
               .batch_first = true,
               .dtype = DType::Float64});
  load_params(gru, c);
  const Tensor x = input(c, "x"), h0 = input(c, "h0");
  const nn::GRUOutput r = gru.forward(x, h0);
  check_against_torch(gru, c, {{"output", r.output}, {"h_n", r.h_n}}, {{"x", x}, {"h0", h0}});
}

// 37 steps, each layer's input projected 8 steps at a time (the last chunk partial); the
// automatic chunk at batch 2 would be one.
TEST(LSTM, SequencesPastSeveralProjectionChunksMatchPyTorch) {
  check_lstm_from_zero_state("lstm_long", {.input_size = 5,
                                           .hidden_size = 4,
                                           .num_layers = 2,
                                           .dtype = DType::Float64,
                                           .projection_chunk = 8});
}

TEST(GRU, SequencesPastSeveralProjectionChunksMatchPyTorch) {
  const auto& c = find_case(cases(), "gru_long");
  nn::GRU gru({.input_size = 5,
               .hidden_size = 4,
               .num_layers = 2,
               .batch_first = true,
               .dtype = DType::Float64,
               .projection_chunk = 8});
  load_params(gru, c);
  const Tensor x = input(c, "x");
  const nn::GRUOutput r = gru.forward(x, Tensor());
  check_against_torch(gru, c, {{"output", r.output}, {"h_n", r.h_n}}, {{"x", x}});
}

TEST(MultiheadAttention, KeyPaddingMaskAndAveragedWeightsMatchPyTorch) {
  const auto& c = find_case(cases(), "mha");
  nn::MultiheadAttention mha(
      {.embed_dim = 8, .num_heads = 2, .batch_first = true, .dtype = DType::Float64});
  load_params(mha, c);
  const Tensor q = input(c, "query"), k = input(c, "key"), v = input(c, "value");
  const auto r = mha.forward(q, k, v, {.key_padding_mask = c["key_padding_mask"]});
  check_against_torch(mha, c, {{"output", r.output}, {"weights", r.weights}},
                      {{"query", q}, {"key", k}, {"value", v}});
}

TEST(MultiheadAttention, CausalSelfAttentionMatchesPyTorch) {
  const auto& c = find_case(cases(), "mha_causal");
  nn::MultiheadAttention mha(
      {.embed_dim = 8, .num_heads = 2, .batch_first = true, .dtype = DType::Float64});
  load_params(mha, c);
  EXPECT_TRUE(all_close(nn::causal_mask(4, DType::Float64), c["attn_mask"], 0, 0));
  const Tensor x = input(c, "x");
  const auto r = mha.forward(x, x, x, {.attn_mask = c["attn_mask"], .need_weights = false});
  EXPECT_FALSE(r.weights.defined());
  check_against_torch(mha, c, {{"output", r.output}}, {{"x", x}});
}

// The causal hint (PyTorch's is_causal) gives what the causal mask gives, also with key
// padding and through the encoder, outputs and gradients.
TEST(MultiheadAttention, CausalHintEqualsTheCausalMask) {
  manual_seed(4);
  nn::MultiheadAttention a(
      {.embed_dim = 8, .num_heads = 2, .batch_first = true, .dtype = DType::Float64});
  const Tensor x = leaf64({2, 6, 8}, 2);
  const Tensor padding =
      reshape(tensor<std::int64_t>({0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0}), {2, 6});
  for (const Tensor& pad : {Tensor(), padding}) {
    nn::AttentionMasks masks;
    masks.attn_mask = nn::causal_mask(6, DType::Float64);
    masks.key_padding_mask = pad;
    masks.need_weights = false;
    const Tensor plain = a.forward(x, x, x, masks).output;
    masks.is_causal = true;
    const Tensor hinted = a.forward(x, x, x, masks).output;
    EXPECT_TRUE(all_close(hinted, plain, 1e-13, 1e-14));
    const auto g1 = grad({sum(mul(plain, plain))}, {x});
    const auto g2 = grad({sum(mul(hinted, hinted))}, {x});
    EXPECT_TRUE(all_close(g2[0], g1[0], 1e-12, 1e-13));
  }
  nn::TransformerEncoder enc({.layer = {.d_model = 8,
                                        .nhead = 2,
                                        .dim_feedforward = 16,
                                        .dropout = 0,
                                        .batch_first = true,
                                        .dtype = DType::Float64},
                              .num_layers = 2});
  const Tensor mask = nn::causal_mask(6, DType::Float64);
  EXPECT_TRUE(all_close(enc.forward(x, mask, Tensor(), true), enc.forward(x, mask), 1e-13, 1e-14));
}

TEST(MultiheadAttention, SequenceFirstAndIntegerMasksAgreeWithBatchFirstAndFloatMasks) {
  manual_seed(3);
  nn::MultiheadAttention a({.embed_dim = 8, .num_heads = 4, .dtype = DType::Float64});
  const Tensor x = leaf64({5, 2, 8}, 1);  // [seq, batch, embed]
  const Tensor causal_int = triu(ones({5, 5}, {.dtype = DType::Int64}), 1);
  const Tensor y1 = a.forward(x, x, x, {.attn_mask = causal_int}).output;
  const Tensor y2 =
      transpose(a.forward(x, x, x, {.attn_mask = nn::causal_mask(5, DType::Float64)}).output, 0, 1);
  EXPECT_EQ(y1.shape(), (Shape{5, 2, 8}));
  EXPECT_TRUE(all_close(transpose(y1, 0, 1), y2, 1e-14, 1e-14));
  // Unbatched input is the batch-of-one case.
  const Tensor x0 = select(x, 1, 0);
  EXPECT_TRUE(all_close(a.forward(x0, x0, x0).weights, select(a.forward(x, x, x).weights, 0, 0),
                        1e-14, 1e-14));
}

// The post-norm ReLU layer under a causal mask, its feed-forward block on chunks of
// `feedforward_chunk` rows (0: automatic, one chunk here).
void check_post_norm_relu_layer(std::int64_t feedforward_chunk) {
  const auto& c = find_case(cases(), "encoder_layer_post_relu");
  nn::TransformerEncoderLayer layer({.d_model = 8,
                                     .nhead = 2,
                                     .dim_feedforward = 16,
                                     .dropout = 0,
                                     .batch_first = true,
                                     .dtype = DType::Float64,
                                     .feedforward_chunk = feedforward_chunk});
  load_params(layer, c);
  const Tensor src = input(c, "src");
  check_against_torch(layer, c, {{"output", layer.forward(src, c["attn_mask"])}}, {{"src", src}});
}

// The pre-norm GELU layer with a key padding mask, as above.
void check_pre_norm_gelu_layer(std::int64_t feedforward_chunk) {
  const auto& c = find_case(cases(), "encoder_layer_pre_gelu");
  nn::TransformerEncoderLayer layer({.d_model = 8,
                                     .nhead = 2,
                                     .dim_feedforward = 16,
                                     .dropout = 0,
                                     .activation = nn::Activation::GELU,
                                     .batch_first = true,
                                     .norm_first = true,
                                     .dtype = DType::Float64,
                                     .feedforward_chunk = feedforward_chunk});
  load_params(layer, c);
  const Tensor src = input(c, "src");
  check_against_torch(layer, c,
                      {{"output", layer.forward(src, Tensor(), c["src_key_padding_mask"])}},
                      {{"src", src}});
}

TEST(TransformerEncoderLayer, PostNormReLUWithCausalMaskMatchesPyTorch) {
  check_post_norm_relu_layer(0);
}

TEST(TransformerEncoderLayer, PreNormGELUWithKeyPaddingMatchesPyTorch) {
  check_pre_norm_gelu_layer(0);
}

// Both layer cases again with the feed-forward block on chunks of 3 of the 8 rows (3, 3, 2).
TEST(TransformerEncoderLayer, FeedForwardInRowChunksMatchesPyTorch) {
  check_post_norm_relu_layer(3);
  check_pre_norm_gelu_layer(3);
}

nn::TransformerEncoderOptions small_encoder() {
  return {.layer = {.d_model = 8,
                    .nhead = 2,
                    .dim_feedforward = 16,
                    .dropout = 0,
                    .batch_first = true,
                    .dtype = DType::Float64},
          .num_layers = 2,
          .final_norm = true};
}

TEST(TransformerEncoder, TwoLayersAndFinalNormMatchPyTorch) {
  const auto& c = find_case(cases(), "encoder");
  nn::TransformerEncoder encoder(small_encoder());
  load_params(encoder, c);
  const Tensor src = input(c, "src");
  check_against_torch(encoder, c, {{"output", encoder.forward(src, c["attn_mask"])}},
                      {{"src", src}});
}

TEST(TransformerEncoder, LayersStartAsCopiesOfOneLayerAsInPyTorch) {
  nn::TransformerEncoder encoder(small_encoder());
  const auto a = encoder.layer(0)->named_parameters(), b = encoder.layer(1)->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(all_close(a[i].second, b[i].second, 0, 0)) << a[i].first;
    EXPECT_NE(a[i].second.impl(), b[i].second.impl()) << "layers must not share " << a[i].first;
  }
}

TEST(TransformerEncoder, CheckpointedLayersGiveTheSameGradients) {
  manual_seed(5);
  auto options = small_encoder();
  options.final_norm = false;  // the loop below runs the layers only
  nn::TransformerEncoder encoder(options);
  const Tensor src = leaf64({2, 6, 8}, 7), mask = nn::causal_mask(6, DType::Float64);
  auto grads = [&](bool checkpointed) {
    encoder.zero_grad();
    Tensor x = src;
    for (std::size_t i = 0; i < encoder.layers().size(); ++i) {
      auto layer = encoder.layer(i);
      auto fn = [layer, mask](const Tensor& t) { return layer->forward(t, mask); };
      x = checkpointed ? checkpoint(fn, x, {.name = "layer"}) : fn(x);
    }
    backward(sum(mul(x, x)));
    std::vector<Tensor> g;
    for (const Tensor& p : encoder.parameters()) g.push_back(clone(p.grad()));
    return g;
  };
  const auto plain = grads(false), checkpointed = grads(true);
  ASSERT_EQ(plain.size(), checkpointed.size());
  for (std::size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(testing::bit_equal(plain[i], checkpointed[i])) << "parameter " << i;
}

TEST(LearnedPositionalEmbedding, AddsTheFirstRowsOfItsTable) {
  manual_seed(1);
  nn::LearnedPositionalEmbedding pos(6, 3, DType::Float64);
  const Tensor x = leaf64({2, 4, 3}, 2);
  const Tensor y = pos.forward(x);
  EXPECT_TRUE(all_close(y, add(x, slice(pos.param("weight"), 0, 0, 4)), 0, 0));
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return pos.forward(in[0]); }, {x}));
  EXPECT_TRUE(throws_with(
      [&] {
        pos.forward(zeros({1, 7, 3}, {.dtype = DType::Float64}));
      },
      {"LearnedPositionalEmbedding", "max_length=6", "[1, 7, 3]"}));
}

// ---------------------------------------------------------------- the fused cell op

TEST(LstmCellOp, GradientsAndSecondDerivativesMatchFiniteDifferences) {
  const Tensor gx = leaf64({3, 8}, 1, -2, 2), gh = leaf64({3, 8}, 2, -2, 2),
               c = leaf64({3, 2}, 3, -2, 2);
  auto h_and_c = [](const std::vector<Tensor>& in) {
    auto [h, c1] = lstm_cell(in[0], in[1], in[2]);
    return cat({h, mul(c1, 0.7)}, 1);
  };
  EXPECT_TRUE(gradcheck(h_and_c, {gx, gh, c}));
  EXPECT_TRUE(gradgradcheck(h_and_c, {gx, gh, c}));
}

TEST(LstmCellOp, MatchesTheElementwiseChainOnEveryWidth) {
  // Widths around the 8-lane chunks, so tails and full chunks both run.
  for (std::int64_t hidden : {1, 7, 8, 9, 17}) {
    SCOPED_TRACE(hidden);
    const Tensor gx = leaf64({2, 4 * hidden}, 4, -3, 3), gh = leaf64({2, 4 * hidden}, 5, -3, 3),
                 c = leaf64({2, hidden}, 6, -3, 3);
    auto [h, c1] = lstm_cell(gx, gh, c);
    const auto g = chunk(add(gx, gh), 4, 1);
    const Tensor ce = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));
    EXPECT_TRUE(all_close(c1, ce, 1e-14, 1e-14));
    EXPECT_TRUE(all_close(h, mul(sigmoid(g[3]), tanh(ce)), 1e-14, 1e-14));
    // The fused derivative (no create_graph) against the chain's.
    backward(add(sum(mul(h, h)), sum(c1)));
    const Tensor fused_gx = clone(gx.grad()), fused_c = clone(c.grad());
    const Tensor gx2 = detach(gx).set_requires_grad(true), c2 = detach(c).set_requires_grad(true);
    const auto g2 = chunk(add(gx2, gh), 4, 1);
    const Tensor ce2 = add(mul(sigmoid(g2[1]), c2), mul(sigmoid(g2[0]), tanh(g2[2])));
    const Tensor he2 = mul(sigmoid(g2[3]), tanh(ce2));
    backward(add(sum(mul(he2, he2)), sum(ce2)));
    EXPECT_TRUE(all_close(fused_gx, gx2.grad(), 1e-12, 1e-12));
    EXPECT_TRUE(all_close(fused_c, c2.grad(), 1e-12, 1e-12));
  }
}

TEST(LstmCellOp, BadShapesAreErrorsNamingThem) {
  EXPECT_TRUE(throws_with(
      [] {
        lstm_cell(zeros({2, 8}), zeros({2, 8}), zeros({2, 3}));
      },
      {"lstm_cell", "[2, 8]", "[2, 3]"}));
  EXPECT_TRUE(throws_with(
      [] {
        lstm_cell(zeros({2, 8}), zeros({2, 8}, {.dtype = DType::Float64}), zeros({2, 2}));
      },
      {"lstm_cell", "float64"}));
}

// ---------------------------------------------------------------- errors

TEST(SequenceLayers, BadOptionsAndInputsAreErrorsNamingThem) {
  EXPECT_TRUE(
      throws_with([] { nn::LSTM({.input_size = 0, .hidden_size = 4}); }, {"LSTM", "input_size"}));
  EXPECT_TRUE(throws_with([] { nn::GRU({.input_size = 3, .hidden_size = 4, .num_layers = 0}); },
                          {"GRU", "num_layers"}));
  EXPECT_TRUE(
      throws_with([] { nn::GRU({.input_size = 3, .hidden_size = 4, .projection_chunk = -1}); },
                  {"GRU", "projection_chunk", "-1"}));
  EXPECT_TRUE(throws_with([] { nn::LSTM({.input_size = 3, .hidden_size = 4, .dropout = 1.5}); },
                          {"dropout", "1.5"}));
  nn::LSTM lstm({.input_size = 3, .hidden_size = 4, .num_layers = 2, .batch_first = true});
  EXPECT_TRUE(throws_with(
      [&] {
        lstm.forward(zeros({2, 5, 4}), std::nullopt);
      },
      {"LSTM", "input_size=3", "[2, 5, 4]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        lstm.forward(zeros({2, 5, 3}), nn::LSTMState{zeros({1, 2, 4}), zeros({2, 2, 4})});
      },
      {"h_0", "[2, 2, 4]", "[1, 2, 4]"}));
  EXPECT_TRUE(throws_with([] { nn::MultiheadAttention({.embed_dim = 10, .num_heads = 3}); },
                          {"embed_dim (10)", "num_heads (3)"}));
  EXPECT_TRUE(
      throws_with([] { nn::TransformerEncoderLayer({.d_model = 8, .feedforward_chunk = -2}); },
                  {"TransformerEncoderLayer", "feedforward_chunk", "-2"}));
  nn::MultiheadAttention mha({.embed_dim = 4, .num_heads = 2});
  const Tensor x = zeros({3, 2, 4});
  EXPECT_TRUE(throws_with(
      [&] {
        mha.forward(x, x, x, {.attn_mask = zeros({3, 4})});
      },
      {"attn_mask", "[3, 3]", "[3, 4]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        mha.forward(x, x, x, {.key_padding_mask = zeros({3, 3})});
      },
      {"key_padding_mask", "[2, 3]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        mha.forward(x, zeros({3, 2, 5}), x);
      },
      {"MultiheadAttention", "[3, 2, 5]"}));
}

TEST(SequenceLayers, UnbatchedInputGivesUnbatchedOutputs) {
  manual_seed(2);
  nn::LSTM lstm({.input_size = 3, .hidden_size = 4, .num_layers = 2, .dtype = DType::Float64});
  const Tensor x = leaf64({5, 3}, 1);
  const auto r = lstm.forward(x, std::nullopt);
  EXPECT_EQ(r.output.shape(), (Shape{5, 4}));
  EXPECT_EQ(r.h_n.shape(), (Shape{2, 4}));
  const auto b = lstm.forward(unsqueeze(x, 1), std::nullopt);
  EXPECT_TRUE(all_close(r.output, select(b.output, 1, 0), 0, 0));
  nn::GRU gru({.input_size = 3, .hidden_size = 4, .dtype = DType::Float64});
  EXPECT_EQ(gru.forward(x, Tensor()).h_n.shape(), (Shape{1, 4}));
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return gru.forward(in[0]); }, {x}));
}

}  // namespace
}  // namespace remat
