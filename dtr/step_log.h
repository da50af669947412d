// Internal: what dtr-next learns from the last training step.  The op calls of a step in order
// and, for each of their outputs, the positions in the step of the calls that read it.  A call
// is named by a hash of its op's name; a step that calls another op at some position has
// diverged from the last one (a dynamic model's different input), and predictions stop for its
// rest.  Slots and their use lists are reused from step to step: no allocation in steady state.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace remat {

class StepLog {
 public:
  std::size_t calls() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }
  std::uint64_t op(std::uint32_t call) const { return ops_[call]; }

  void add_call(std::uint64_t op_hash, std::size_t outputs) {
    ops_.push_back(op_hash);
    first_slot_.push_back(static_cast<std::uint32_t>(slots_));
    for (std::size_t i = 0; i < outputs; ++i, ++slots_) {
      if (slots_ == uses_.size())
        uses_.emplace_back();
      else
        uses_[slots_].clear();
    }
  }
  // Call `reader` read output `output` of call `call` (calls are added in order, so each list
  // stays sorted).
  void add_use(std::uint32_t call, int output, std::uint32_t reader) {
    uses_[first_slot_[call] + static_cast<std::uint32_t>(output)].push_back(reader);
  }
  // The first call at or after `from` that read output `output` of call `call`; none when the
  // output was not read again.
  std::optional<std::uint32_t> next_use(std::uint32_t call, int output, std::uint32_t from) const {
    const std::vector<std::uint32_t>* u = reads(call, output);
    if (!u) return std::nullopt;
    const auto it = std::lower_bound(u->begin(), u->end(), from);
    if (it == u->end()) return std::nullopt;
    return *it;
  }
  // The last call that read output `output` of call `call`; none when nothing read it.
  std::optional<std::uint32_t> last_use(std::uint32_t call, int output) const {
    const std::vector<std::uint32_t>* u = reads(call, output);
    if (!u || u->empty()) return std::nullopt;
    return u->back();
  }
  void clear() {
    ops_.clear();
    first_slot_.clear();
    slots_ = 0;
  }

 private:
  const std::vector<std::uint32_t>* reads(std::uint32_t call, int output) const {
    const std::size_t slot = first_slot_[call] + static_cast<std::uint32_t>(output);
    if (slot >= slots_ || (call + 1 < first_slot_.size() && slot >= first_slot_[call + 1]))
      return nullptr;  // the call had fewer outputs then
    return &uses_[slot];
  }
  std::vector<std::uint64_t> ops_;
  std::vector<std::uint32_t> first_slot_;
  std::vector<std::vector<std::uint32_t>> uses_;  // the first slots_ are this step's
  std::size_t slots_ = 0;
};

}  // namespace remat
