// Recurrent layers with PyTorch's parameter names, shapes and initialisation (every weight and
// bias uniform(+-1/sqrt(hidden_size))), so a converted PyTorch state dict loads into them.
// Gates are stacked in PyTorch's order: LSTM i, f, g, o; GRU r, z, n.
// Usage: nn::LSTM lstm({.input_size = 64, .hidden_size = 128, .num_layers = 2,
//                       .batch_first = true});
//        auto [out, h_n, c_n] = lstm.forward(x, std::nullopt);  // x [batch, seq, 64]
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "nn/module.h"

namespace remat::nn {

struct RNNCellOptions {
  std::int64_t input_size = 0;
  std::int64_t hidden_size = 0;
  bool bias = true;
  DType dtype = DType::Float32;
};

struct LSTMState {
  Tensor h, c;
};

// One LSTM step: weight_ih [4H, in], weight_hh [4H, H], bias_ih, bias_hh [4H].  x is
// [batch, in] or unbatched [in]; the state defaults to zeros.  The gate arithmetic is the fused
// lstm_cell op (ops/rnn.h).
class LSTMCell : public Module {
 public:
  explicit LSTMCell(RNNCellOptions options);
  LSTMCell(std::int64_t input_size, std::int64_t hidden_size)
      : LSTMCell(RNNCellOptions{.input_size = input_size, .hidden_size = hidden_size}) {}
  LSTMState forward(const Tensor& x, const std::optional<LSTMState>& state);
  Tensor forward(const Tensor& x) override { return forward(x, std::nullopt).h; }
  void reset_parameters();
  const RNNCellOptions& options() const { return options_; }

 private:
  RNNCellOptions options_;
};

// One GRU step: weight_ih [3H, in], weight_hh [3H, H], bias_ih, bias_hh [3H];
// n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h.
class GRUCell : public Module {
 public:
  explicit GRUCell(RNNCellOptions options);
  GRUCell(std::int64_t input_size, std::int64_t hidden_size)
      : GRUCell(RNNCellOptions{.input_size = input_size, .hidden_size = hidden_size}) {}
  Tensor forward(const Tensor& x, const Tensor& h);  // h undefined: zeros
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()); }
  void reset_parameters();
  const RNNCellOptions& options() const { return options_; }

 private:
  RNNCellOptions options_;
};

struct RNNOptions {
  std::int64_t input_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 1;
  bool bias = true;
  // Input and output [batch, seq, feature] instead of [seq, batch, feature]; the states stay
  // [num_layers, batch, hidden] either way, as in PyTorch.
  bool batch_first = false;
  // Dropout on each layer's output but the last's, in training.
  double dropout = 0;
  DType dtype = DType::Float32;
  // Steps per chunk of each layer's input projection (one GEMM per chunk, made as the recurrence
  // reaches it); 0: as many as make about 256 rows (steps x batch).  Under a budget a chunk is
  // evicted and rebuilt alone.  The same result whatever the chunk.
  std::int64_t projection_chunk = 0;
};

struct LSTMOutput {
  Tensor output;    // the last layer's h at every step
  Tensor h_n, c_n;  // [num_layers, batch, hidden]: each layer's state after the last step
};

// A stack of LSTM layers, parameters weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
// bias_hh_l{k}.  Each layer projects its input a chunk of steps at a time
// (RNNOptions::projection_chunk), one GEMM per chunk made as the recurrence reaches it (under a
// budget a chunk is evicted and rebuilt alone, and its gradient is put together as soon as the
// recurrence has passed back through it), and runs one hidden-state GEMM and one fused cell op
// per step.  Unbatched input [seq, in] gives unbatched outputs.  Bidirectional layers and
// proj_size are not supported.
class LSTM : public Module {
 public:
  explicit LSTM(RNNOptions options);
  LSTMOutput forward(const Tensor& x, const std::optional<LSTMState>& state);
  Tensor forward(const Tensor& x) override { return forward(x, std::nullopt).output; }
  void reset_parameters();
  const RNNOptions& options() const { return options_; }

 private:
  RNNOptions options_;
};

struct GRUOutput {
  Tensor output, h_n;
};

// A stack of GRU layers with the parameter names of LSTM (3H gate rows).
class GRU : public Module {
 public:
  explicit GRU(RNNOptions options);
  GRUOutput forward(const Tensor& x, const Tensor& h0);  // h0 undefined: zeros
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()).output; }
  void reset_parameters();
  const RNNOptions& options() const { return options_; }

 private:
  RNNOptions options_;
};

}  // namespace remat::nn
