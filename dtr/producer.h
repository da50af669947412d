// What the cache knows of an op: an opaque, replayable producer.  ops/ implements it; dtr/
// calls execute() to run an op for the first time and to rematerialize evicted outputs.
#pragma once
#include <span>
#include <string_view>

#include "core/tensor_meta.h"

namespace remat {

class Producer {
 public:
  virtual ~Producer() = default;
  virtual std::string_view name() const = 0;
  // Runs the kernel on resident buffers.  Pure: same inputs give bit-identical outputs.
  virtual void execute(std::span<const KernelArg> inputs,
                       std::span<const KernelArg> outputs) const = 0;
};

}  // namespace remat
