// Fused recurrent cells: the LSTM gate arithmetic of one time step as one op, forward and
// derivative, instead of a chain of a dozen element-wise ops per step.
// Usage: auto [h, c] = lstm_cell(linear(x, w_ih, b), linear(h_prev, w_hh), c_prev);
#pragma once
#include <utility>

#include "core/tensor.h"

namespace remat {

// PyTorch's LSTM cell on pre-activations split in two addends (the input's and the hidden
// state's projections, [batch, 4 * hidden] each, gates in the order i, f, g, o) and the previous
// cell state [batch, hidden]:
//   i, f, o = sigmoid(.), g = tanh(.) of gates_x + gates_h;  c = f * c_prev + i * g;
//   h = o * tanh(c).  Returns {h, c}.
// The derivative is one fused op too when no graph of it is being built; under create_graph it
// is written with public ops, so second derivatives work (its values may then differ from the
// fused derivative's in the last bits).
std::pair<Tensor, Tensor> lstm_cell(const Tensor& gates_x, const Tensor& gates_h,
                                    const Tensor& c_prev);

}  // namespace remat
