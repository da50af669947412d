// The two small-op workloads of bench/compare_torch.sh, written with plain ops as a user would:
// a hand-written LSTM (input and hidden 128, 50 steps, batch 64, a linear head, cross entropy,
// Adam) and a binary TreeLSTM (hidden 64, a vocabulary of 100 leaf tokens, 16 random trees of 2
// to 71 leaves per step, one tree at a time, a 5-class head on the root, Adam).  The trees come
// from a 64-bit LCG that bench/compare_torch.py repeats exactly, so both sides build the same
// graphs.  Usage: SmallOpModel m = lstm_cell_model(); double ms = m.step();
#pragma once
#include <functional>
#include <memory>

#include "nn/nn.h"
#include "remat.h"

namespace remat::bench {

struct SmallOpModel {
  std::function<Tensor()> loss;  // builds one step's graph and returns the loss
  std::vector<Tensor> params;
  std::unique_ptr<nn::Adam> optimizer;
  // One training step in milliseconds: zero_grad, forward, backward (which frees the graph
  // before the optimizer's in-place update), step.
  double step();
};

SmallOpModel lstm_cell_model();
SmallOpModel treelstm_model();

}  // namespace remat::bench
