// One checkpoint call: what its forward recorded, and the replay that recreates the saved tensors
// it did not keep.  Internal to autograd/checkpoint.cpp and the dispatch hooks.
//
// Recording: op calls of the checkpoint's recompute code (outside its SAVE regions) are counted;
// a node saving an output of call n (or a view of it) gets slot (n, output) instead of a handle.
// Replay: fn runs again under no-grad with SAVE regions skipped; output j of counted call n fills
// the slots waiting on (n, j).  SAVE regions keep their saved tensors as handles, except those
// made by recompute code, which the replay recreates too.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/saved_slot.h"
#include "core/random.h"

namespace remat::detail {

class CheckpointFrame final : public SlotSource,
                              public std::enable_shared_from_this<CheckpointFrame> {
 public:
  CheckpointFrame(TensorsFn fn, CheckpointOptions options);

  std::vector<Tensor> record(const std::vector<Tensor>& inputs);
  bool recording() const { return mode_ == Mode::Recording; }
  bool replaying() const { return mode_ == Mode::Replaying; }

  // ---- while recording
  std::optional<SlotRef> pack(const Tensor& t);
  // t was computed during this forward (in recompute code or a SAVE region).
  bool made_here(const Tensor& t) const { return made_here_.count(t.storage().get()) > 0; }
  // A node keeps t as a handle: counted in the report for the region that keeps it.
  void note_saved_handle(const Tensor& t);
  // A RECOMPUTE consumer reads t: keep it when a SAVE region made it, or when it is an input.
  void keep_for_recompute(const Tensor& t);
  std::vector<Tensor> record_region(const std::string& name, bool recompute, const TensorsFn& fn,
                                    const std::vector<Tensor>& inputs);
  void on_record_inputs(std::span<const Tensor> inputs);
  void on_record_outputs(std::span<const Tensor> outputs, bool is_view);

  // ---- while replaying
  std::vector<Tensor> replay_region(const std::string& name, bool recompute, const TensorsFn& fn,
                                    const std::vector<Tensor>& inputs);
  // A checkpoint called inside this replay runs as plain code of this one.
  std::vector<Tensor> run_nested(const TensorsFn& fn, const std::vector<Tensor>& inputs);
  void on_replay_outputs(std::span<const Tensor> outputs, bool is_view, double seconds);
  bool skip_inplace(const Tensor& self);

  // ---- SlotSource
  Tensor fetch(std::size_t slot) override;
  void release(std::size_t slot) override;

 private:
  enum class Mode { Recording, Done, Replaying };
  struct Produced {  // an output of a counted call
    std::weak_ptr<Storage> storage;
    std::uint64_t call;
    std::uint32_t output;
    TensorMeta meta;
  };
  struct SaveOutputRef {
    std::weak_ptr<Storage> storage;
    std::size_t region, output;
  };
  struct RegionOutput {
    TensorMeta meta;
    std::size_t nbytes = 0;
    int input = -1;  // the region returned its own input `input`
    Tensor kept{};   // kept for a RECOMPUTE consumer; no history (no cycle through the graph)
  };
  struct RegionRecord {
    std::string name;
    bool recompute;
    std::vector<RegionOutput> outputs{};
    RegionReport stats{};                       // not yet added to the thread's report
    std::unordered_set<const Storage*> kept{};  // counted in stats, while recording
  };
  struct Slot {
    std::uint64_t call;
    std::uint32_t output;
    TensorMeta meta;      // the saved view
    TensorMeta produced;  // the call's output in the forward
    std::size_t nbytes;
    Tensor value{};
    Tensor original{};  // DeterminismCheck::Values only
    bool filled = false, released = false;
  };

  void finish_recording();
  void replay();
  void fill(Slot& slot, const Tensor& out, std::uint64_t call);
  void note_kept(RegionRecord& region, const Tensor& t);
  RegionReport& replay_stats();
  std::string replay_place() const;
  void flush_stats();

  TensorsFn fn_;
  CheckpointOptions options_;
  RngState rng_;
  Mode mode_ = Mode::Recording;

  // The checkpoint's inputs: kept (a handle, or a slot of an enclosing checkpoint) only when
  // its recompute code reads them.
  std::vector<Tensor> inputs_;
  std::vector<std::optional<SlotRef>> input_refs_;
  std::vector<TensorMeta> input_metas_;
  std::vector<std::size_t> input_nbytes_;
  std::vector<bool> input_needed_;

  // Recording state.
  std::uint64_t calls_ = 0;
  int save_depth_ = 0;
  std::vector<std::size_t> open_regions_;
  std::unordered_map<const Storage*, Produced> produced_;
  std::unordered_map<const Storage*, SaveOutputRef> save_outputs_;
  std::unordered_set<const Storage*> made_here_;

  std::vector<RegionRecord> regions_;  // in call order, SAVE-in-SAVE not counted
  std::vector<Slot> slots_;
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> waiting_;  // by call
  RegionReport unmarked_, inputs_stats_;

  // Replay state.
  std::uint64_t replay_calls_ = 0;
  std::size_t replay_regions_ = 0;
  int nested_ = 0;
  std::vector<std::size_t> replay_open_;
  std::unordered_set<const Storage*> created_;  // storages made by this replay
};

// The innermost checkpoint recording or replaying on this thread, or null.
CheckpointFrame* current_frame();

}  // namespace remat::detail
