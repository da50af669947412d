// How a node holds a saved tensor that a checkpoint will recreate: instead of a handle, a
// reference into the checkpoint's frame, filled by the checkpoint's replay the first time the
// backward asks for it.  Usage (autograd/node.cpp): if (auto ref = detail::pack_saved(t)) ...
#pragma once
#include <cstddef>
#include <memory>
#include <optional>

#include "core/tensor.h"

namespace remat::detail {

// A checkpoint frame as nodes see it.
class SlotSource {
 public:
  virtual ~SlotSource() = default;
  // The recreated value of `slot` (replaying the checkpoint when it is not filled yet).
  virtual Tensor fetch(std::size_t slot) = 0;
  // The node is done with it: the frame drops the value.
  virtual void release(std::size_t slot) = 0;
};

struct SlotRef {
  std::shared_ptr<SlotSource> source;
  std::size_t slot = 0;
  Tensor fetch() const { return source->fetch(slot); }
  void release() const { source->release(slot); }
};

// While a checkpoint records its forward: a slot when `t` will be recreated by its replay (t was
// computed by the checkpoint's recompute code), nothing when the node must keep a handle.
std::optional<SlotRef> pack_saved(const Tensor& t);

}  // namespace remat::detail
