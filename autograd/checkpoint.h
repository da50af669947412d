// Checkpoint regions (DESIGN.md section 7; reference: remat-mental-model.md).  checkpoint(fn)
// keeps only what it must and replays fn right before its backward needs a saved tensor.
// Inside fn, region(g, name) marks a SAVE region: it keeps what its own backward needs and is
// skipped during the replay, returning its kept outputs or placeholders.  A SAVE region keeps an
// output only when a RECOMPUTE consumer reads it: an explicit region(g, name, true), or plain
// code after recompute_needs_tensor(t) (producer responsibility).
// Usage:
//   Tensor y = checkpoint([&](const Tensor& x) {
//     Tensor c = region([&](const Tensor& t) { return conv(t); }, "conv")(x);
//     return region([&](const Tensor& t) { return relu(bn(t)); }, "bn_relu", true)(c);
//   }, x, {.name = "block1"});
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/checkpoint_report.h"
#include "core/tensor.h"

namespace remat {

using TensorsFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using TensorFn = std::function<Tensor(const Tensor&)>;

// What the replay checks against the forward.  Metadata: every recreated saved tensor has the
// shape and dtype it had (and the replay makes the same op calls and regions).  Values: also
// the same bits, which keeps the original saved tensors alive until the replay (debugging).
enum class DeterminismCheck { Metadata, Values };

struct CheckpointOptions {
  std::string name = "checkpoint";  // in errors and in the report
  DeterminismCheck determinism = DeterminismCheck::Metadata;
  // The replay restarts the default random generator where the forward found it, so random ops
  // without an explicit seed (dropout) draw the same keys.
  bool preserve_rng = true;
};

// Runs fn(inputs) recording a checkpoint (when grad mode is on; otherwise just runs fn).
std::vector<Tensor> checkpoint(const TensorsFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options = {});
Tensor checkpoint(const TensorFn& fn, const Tensor& input, const CheckpointOptions& options = {});

// A marked stretch of a checkpoint's function; see region().  Outside a checkpoint it just
// runs its function, so a model can carry regions and be checkpointed or not.
class Region {
 public:
  Region(TensorsFn fn, std::string name, bool recompute);
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  Tensor operator()(const Tensor& input) const;  // for single-output functions

 private:
  TensorsFn fn_;
  std::string name_;
  bool recompute_;
};

// recompute = false: a SAVE region (skipped during replay).  recompute = true: an explicit
// RECOMPUTE region; its inputs made by SAVE regions are kept for it.  SAVE inside SAVE is part
// of the outer region; RECOMPUTE inside SAVE is an error.
Region region(TensorsFn fn, std::string name, bool recompute = false);
Region region(TensorFn fn, std::string name, bool recompute = false);

// Declares that plain code after this point recomputes from t (and the others): a SAVE
// region's output among them is kept for the replay.  Outside a checkpoint's forward it does
// nothing.
void recompute_needs_tensor(const Tensor& t);
template <class... More>
void recompute_needs_tensor(const Tensor& t, const More&... more) {
  recompute_needs_tensor(t);
  (recompute_needs_tensor(more), ...);
}

// True for an output of a SAVE region that its checkpoint's replay skipped without keeping it:
// shape, dtype and device as the original, no data (views work; kernels and reads throw).
bool is_placeholder(const Tensor& t);
// True while a checkpoint replays its function on this thread.
bool is_recomputing();

}  // namespace remat
