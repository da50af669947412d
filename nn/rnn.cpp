#include "nn/rnn.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/init.h"
#include "remat.h"

namespace remat::nn {
namespace {

void check_cell_options(std::string_view layer, const RNNCellOptions& o) {
  REMAT_CHECK(o.input_size > 0 && o.hidden_size > 0,
              "{}: input_size and hidden_size must be positive, got {} and {}", layer, o.input_size,
              o.hidden_size);
  REMAT_CHECK(is_floating(o.dtype), "{}: dtype must be float32 or float64, got {}", layer, o.dtype);
}

void check_options(std::string_view layer, const RNNOptions& o) {
  check_cell_options(layer,
                     {.input_size = o.input_size, .hidden_size = o.hidden_size, .dtype = o.dtype});
  REMAT_CHECK(o.num_layers >= 1, "{}: num_layers must be at least 1, got {}", layer, o.num_layers);
  REMAT_CHECK(o.dropout >= 0 && o.dropout <= 1, "{}: dropout must be in [0, 1], got {}", layer,
              o.dropout);
  REMAT_CHECK(o.projection_chunk >= 0,
              "{}: projection_chunk must be 0 (automatic) or positive, got {}", layer,
              o.projection_chunk);
}

// weight_ih{suffix}, weight_hh{suffix}, bias_ih{suffix}, bias_hh{suffix} for `gates` x hidden.
void register_layer(Module& m, const std::string& suffix, std::int64_t gates, std::int64_t in,
                    std::int64_t hidden, bool bias, DType dtype) {
  const TensorOptions t{.dtype = dtype};
  m.register_parameter("weight_ih" + suffix, zeros({gates * hidden, in}, t));
  m.register_parameter("weight_hh" + suffix, zeros({gates * hidden, hidden}, t));
  if (bias) {
    m.register_parameter("bias_ih" + suffix, zeros({gates * hidden}, t));
    m.register_parameter("bias_hh" + suffix, zeros({gates * hidden}, t));
  }
}

// PyTorch's initialisation of every recurrent layer: all parameters uniform(+-1/sqrt(hidden)).
void reset_uniform(Module& m, std::int64_t hidden) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  for (const Tensor& p : m.parameters()) init::uniform_(p, -bound, bound);
}

// x·Wᵀ + b for each step of seq [steps, batch, in], one GEMM per chunk of `chunk` steps (0:
// about kChunkRows rows, steps x batch), each made when the recurrence reaches its first step.
// Each chunk's projection is its own value, evicted and rebuilt a chunk at a time under a
// budget, and made between the steps around it, so in backward its steps' gradients meet in a
// chunk-sized stack as soon as the recurrence has passed back through it.  One projection of
// the whole sequence before the recurrence had to be rebuilt whole to recompute any step, and
// its gradient waited piece by piece in the engine until the recurrence reached the first
// step: a 128-step LSTM LM (hidden 256, batch 32) could not train below 0.65 of its peak.
// 256 rows (8 steps of that LM): at 0.3 and 0.4 of its peak, 10-25% less recomputation than 512
// for about 1% more time unbudgeted; 128 cost 4%.
class StepProjection {
 public:
  static constexpr std::int64_t kChunkRows = 256;
  StepProjection(const Tensor& seq, const Tensor& w, const Tensor& b, std::int64_t chunk)
      : steps_per_chunk_(chunk > 0 ? chunk
                                   : std::max<std::int64_t>(
                                         1, kChunkRows / std::max<std::int64_t>(1, seq.size(1)))),
        parts_(split(seq, steps_per_chunk_, 0)),
        w_(w),
        b_(b) {}
  // Steps are asked for in order, 0 first.
  const Tensor& step(std::int64_t t) {
    const auto in_part = static_cast<std::size_t>(t % steps_per_chunk_);
    if (in_part == 0)
      steps_ = unbind(linear(parts_[static_cast<std::size_t>(t / steps_per_chunk_)], w_, b_), 0);
    return steps_[in_part];
  }

 private:
  std::int64_t steps_per_chunk_;
  std::vector<Tensor> parts_;
  Tensor w_, b_;
  std::vector<Tensor> steps_;
};

Tensor param_or_none(const Module& m, const std::string& name, bool present) {
  return present ? m.param(name) : Tensor();
}

// x [batch, in] (or [in], unbatched) for a cell; returns [batch, in] and whether it was batched.
std::pair<Tensor, bool> cell_input(std::string_view layer, const Tensor& x, std::int64_t in,
                                   DType dtype) {
  REMAT_CHECK(x.defined(), "{}: the input is an undefined tensor", layer);
  REMAT_CHECK((x.dim() == 1 || x.dim() == 2) && x.shape().back() == in && x.dtype() == dtype,
              "{}(input_size={}): expected input [batch, {}] or [{}] of {}, got shape {} ({})",
              layer, in, in, in, dtype, x.shape(), x.dtype());
  return {x.dim() == 1 ? unsqueeze(x, 0) : x, x.dim() == 2};
}

// A state [batch, hidden] (or [hidden] for unbatched input), zeros when undefined.
Tensor cell_state(std::string_view layer, std::string_view what, const Tensor& s, bool batched,
                  std::int64_t batch, std::int64_t hidden, DType dtype) {
  if (!s.defined()) return zeros({batch, hidden}, {.dtype = dtype});
  const Shape expected = batched ? Shape{batch, hidden} : Shape{hidden};
  REMAT_CHECK(s.shape() == expected && s.dtype() == dtype,
              "{}: {} must have shape {} ({}), got {} ({})", layer, what, expected, dtype,
              s.shape(), s.dtype());
  return batched ? s : unsqueeze(s, 0);
}

// GRU step from the input projection xw = W_ih x + b_ih and the previous state.
Tensor gru_step(const Tensor& xw, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh) {
  const auto x3 = chunk(xw, 3, 1);
  const auto h3 = chunk(linear(h, w_hh, b_hh), 3, 1);
  const Tensor r = sigmoid(add(x3[0], h3[0]));
  const Tensor z = sigmoid(add(x3[1], h3[1]));
  const Tensor n = tanh(add(x3[2], mul(r, h3[2])));
  return add(n, mul(z, sub(h, n)));  // (1 - z) * n + z * h
}

// A sequence input [seq, batch, in] / [batch, seq, in] / unbatched [seq, in], as time-major
// [seq, batch, in] (contiguous), with whether it was batched.
std::pair<Tensor, bool> sequence_input(std::string_view layer, const Tensor& x,
                                       const RNNOptions& o) {
  REMAT_CHECK(x.defined(), "{}: the input is an undefined tensor", layer);
  const char* layout = o.batch_first ? "[batch, seq, {}]" : "[seq, batch, {}]";
  REMAT_CHECK(
      (x.dim() == 2 || x.dim() == 3) && x.shape().back() == o.input_size && x.dtype() == o.dtype,
      "{}(input_size={}, batch_first={}): expected input {} or unbatched [seq, {}] of {}, "
      "got shape {} ({})",
      layer, o.input_size, o.batch_first, fmt::format(fmt::runtime(layout), o.input_size),
      o.input_size, o.dtype, x.shape(), x.dtype());
  if (x.dim() == 2) return {unsqueeze(x, 1), false};
  return {o.batch_first ? contiguous(transpose(x, 0, 1)) : x, true};
}

// An initial state [layers, batch, hidden] (or [layers, hidden] unbatched) as per-layer
// [batch, hidden] tensors; zeros when undefined.
std::vector<Tensor> layer_states(std::string_view layer, std::string_view what, const Tensor& s,
                                 bool batched, std::int64_t batch, const RNNOptions& o) {
  std::vector<Tensor> out;
  if (s.defined()) {
    const Shape expected =
        batched ? Shape{o.num_layers, batch, o.hidden_size} : Shape{o.num_layers, o.hidden_size};
    REMAT_CHECK(s.shape() == expected && s.dtype() == o.dtype,
                "{}: {} must have shape {} ({}), got {} ({})", layer, what, expected, o.dtype,
                s.shape(), s.dtype());
  }
  for (std::int64_t k = 0; k < o.num_layers; ++k) {
    if (!s.defined())
      out.push_back(zeros({batch, o.hidden_size}, {.dtype = o.dtype}));
    else
      out.push_back(batched ? select(s, 0, k) : unsqueeze(select(s, 0, k), 0));
  }
  return out;
}

// The stacked per-layer final states, unbatched when the input was.
Tensor final_states(const std::vector<Tensor>& per_layer, bool batched) {
  const Tensor s = stack(per_layer, 0);
  return batched ? s : squeeze(s, 1);
}

// The last layer's per-step outputs in the caller's layout.
Tensor sequence_output(const std::vector<Tensor>& steps, bool batched, bool batch_first) {
  if (!batched) return squeeze(stack(steps, 0), 1);
  return stack(steps, batch_first ? 1 : 0);
}

}  // namespace

// ---------------------------------------------------------------- cells

LSTMCell::LSTMCell(RNNCellOptions options) : Module("LSTMCell"), options_(options) {
  check_cell_options("LSTMCell", options_);
  register_layer(*this, "", 4, options_.input_size, options_.hidden_size, options_.bias,
                 options_.dtype);
  reset_parameters();
}

void LSTMCell::reset_parameters() {
  reset_uniform(*this, options_.hidden_size);
}

LSTMState LSTMCell::forward(const Tensor& x, const std::optional<LSTMState>& state) {
  const auto& o = options_;
  auto [x2, batched] = cell_input("LSTMCell", x, o.input_size, o.dtype);
  const std::int64_t batch = x2.size(0);
  const Tensor h = cell_state("LSTMCell", "h", state ? state->h : Tensor(), batched, batch,
                              o.hidden_size, o.dtype);
  const Tensor c = cell_state("LSTMCell", "c", state ? state->c : Tensor(), batched, batch,
                              o.hidden_size, o.dtype);
  auto [h1, c1] =
      lstm_cell(linear(x2, param("weight_ih"), param_or_none(*this, "bias_ih", o.bias)),
                linear(h, param("weight_hh"), param_or_none(*this, "bias_hh", o.bias)), c);
  if (!batched) return {squeeze(h1, 0), squeeze(c1, 0)};
  return {h1, c1};
}

GRUCell::GRUCell(RNNCellOptions options) : Module("GRUCell"), options_(options) {
  check_cell_options("GRUCell", options_);
  register_layer(*this, "", 3, options_.input_size, options_.hidden_size, options_.bias,
                 options_.dtype);
  reset_parameters();
}

void GRUCell::reset_parameters() {
  reset_uniform(*this, options_.hidden_size);
}

Tensor GRUCell::forward(const Tensor& x, const Tensor& h) {
  const auto& o = options_;
  auto [x2, batched] = cell_input("GRUCell", x, o.input_size, o.dtype);
  const Tensor h2 = cell_state("GRUCell", "h", h, batched, x2.size(0), o.hidden_size, o.dtype);
  const Tensor xw = linear(x2, param("weight_ih"), param_or_none(*this, "bias_ih", o.bias));
  const Tensor h1 = gru_step(xw, h2, param("weight_hh"), param_or_none(*this, "bias_hh", o.bias));
  return batched ? h1 : squeeze(h1, 0);
}

// ---------------------------------------------------------------- sequence layers

LSTM::LSTM(RNNOptions options) : Module("LSTM"), options_(options) {
  check_options("LSTM", options_);
  for (std::int64_t k = 0; k < options_.num_layers; ++k)
    register_layer(*this, "_l" + std::to_string(k), 4,
                   k == 0 ? options_.input_size : options_.hidden_size, options_.hidden_size,
                   options_.bias, options_.dtype);
  reset_parameters();
}

void LSTM::reset_parameters() {
  reset_uniform(*this, options_.hidden_size);
}

LSTMOutput LSTM::forward(const Tensor& x, const std::optional<LSTMState>& state) {
  const auto& o = options_;
  auto [seq, batched] = sequence_input("LSTM", x, o);
  const std::int64_t steps = seq.size(0), batch = seq.size(1);
  std::vector<Tensor> hs =
      layer_states("LSTM", "h_0", state ? state->h : Tensor(), batched, batch, o);
  std::vector<Tensor> cs =
      layer_states("LSTM", "c_0", state ? state->c : Tensor(), batched, batch, o);
  std::vector<Tensor> outs;
  for (std::int64_t k = 0; k < o.num_layers; ++k) {
    const std::string s = "_l" + std::to_string(k);
    // Both biases go into each chunk's input projection.
    const Tensor bias = o.bias ? add(param("bias_ih" + s), param("bias_hh" + s)) : Tensor();
    StepProjection xs(seq, param("weight_ih" + s), bias, o.projection_chunk);
    const Tensor w_hh = param("weight_hh" + s);
    Tensor h = hs[k], c = cs[k];
    outs.clear();
    for (std::int64_t t = 0; t < steps; ++t) {
      std::tie(h, c) = lstm_cell(xs.step(t), linear(h, w_hh), c);
      outs.push_back(h);
    }
    hs[k] = h, cs[k] = c;
    if (k + 1 < o.num_layers) {
      seq = stack(outs, 0);
      if (o.dropout > 0 && is_training()) seq = dropout(seq, o.dropout, true);
    }
  }
  return {sequence_output(outs, batched, o.batch_first), final_states(hs, batched),
          final_states(cs, batched)};
}

GRU::GRU(RNNOptions options) : Module("GRU"), options_(options) {
  check_options("GRU", options_);
  for (std::int64_t k = 0; k < options_.num_layers; ++k)
    register_layer(*this, "_l" + std::to_string(k), 3,
                   k == 0 ? options_.input_size : options_.hidden_size, options_.hidden_size,
                   options_.bias, options_.dtype);
  reset_parameters();
}

void GRU::reset_parameters() {
  reset_uniform(*this, options_.hidden_size);
}

GRUOutput GRU::forward(const Tensor& x, const Tensor& h0) {
  const auto& o = options_;
  auto [seq, batched] = sequence_input("GRU", x, o);
  const std::int64_t steps = seq.size(0), batch = seq.size(1);
  std::vector<Tensor> hs = layer_states("GRU", "h_0", h0, batched, batch, o);
  std::vector<Tensor> outs;
  for (std::int64_t k = 0; k < o.num_layers; ++k) {
    const std::string s = "_l" + std::to_string(k);
    StepProjection xs(seq, param("weight_ih" + s), param_or_none(*this, "bias_ih" + s, o.bias),
                      o.projection_chunk);
    const Tensor w_hh = param("weight_hh" + s), b_hh = param_or_none(*this, "bias_hh" + s, o.bias);
    Tensor h = hs[k];
    outs.clear();
    for (std::int64_t t = 0; t < steps; ++t) {
      h = gru_step(xs.step(t), h, w_hh, b_hh);
      outs.push_back(h);
    }
    hs[k] = h;
    if (k + 1 < o.num_layers) {
      seq = stack(outs, 0);
      if (o.dropout > 0 && is_training()) seq = dropout(seq, o.dropout, true);
    }
  }
  return {sequence_output(outs, batched, o.batch_first), final_states(hs, batched)};
}

}  // namespace remat::nn
