#include "autograd/checkpoint_frame.h"

#include <cmath>

#include "autograd/checkpoint_hooks.h"
#include "autograd/grad_mode.h"
#include "autograd/meta.h"
#include "autograd/placeholder.h"

namespace remat {
namespace detail {
namespace {

// The frames recording or replaying on this thread, innermost last.  A replaying frame hides
// the recording frames below it: what its replay does is none of their business.
thread_local std::vector<CheckpointFrame*> t_frames;

struct FramePush {
  explicit FramePush(CheckpointFrame* f) { t_frames.push_back(f); }
  ~FramePush() { t_frames.pop_back(); }
  FramePush(const FramePush&) = delete;
  FramePush& operator=(const FramePush&) = delete;
};

template <class F>
void for_each_recording(F&& f) {
  for (auto it = t_frames.rbegin(); it != t_frames.rend() && (*it)->recording(); ++it) f(**it);
}

Tensor view_of(const TensorMeta& meta, std::shared_ptr<Storage> storage) {
  auto impl = std::make_shared<TensorImpl>();
  impl->meta = meta;
  impl->storage = std::move(storage);
  return Tensor(std::move(impl));
}

bool same_values(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  if (va.size() != vb.size()) return false;
  for (std::size_t i = 0; i < va.size(); ++i)
    if (!(va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i])))) return false;
  return true;
}

const char* policy(bool recompute) {
  return recompute ? "recompute" : "save";
}

}  // namespace

CheckpointFrame* current_frame() {
  return t_frames.empty() ? nullptr : t_frames.back();
}

CheckpointFrame::CheckpointFrame(TensorsFn fn, CheckpointOptions options)
    : fn_(std::move(fn)), options_(std::move(options)) {
  unmarked_.region = "(unmarked)";
  inputs_stats_.region = "(inputs)";
}

// ---------------------------------------------------------------- recording

std::vector<Tensor> CheckpointFrame::record(const std::vector<Tensor>& inputs) {
  inputs_ = inputs;
  input_refs_.resize(inputs.size());
  input_needed_.assign(inputs.size(), false);
  for (const auto& t : inputs) {
    input_metas_.push_back(t.meta());
    input_nbytes_.push_back(t.storage()->nbytes());
  }
  rng_ = rng_state();
  std::vector<Tensor> outputs;
  try {
    FramePush push(this);
    outputs = fn_(inputs);
  } catch (...) {
    mode_ = Mode::Done;
    throw;
  }
  finish_recording();
  return outputs;
}

void CheckpointFrame::finish_recording() {
  mode_ = Mode::Done;
  for (std::size_t k = 0; k < inputs_.size(); ++k) {
    if (!input_needed_[k]) {
      inputs_[k] = Tensor();
      continue;
    }
    // An input made by an enclosing checkpoint's recompute code is that checkpoint's to recreate.
    if (auto ref = pack_saved(inputs_[k])) {
      input_refs_[k] = std::move(ref);
      inputs_[k] = Tensor();
    } else {
      ++inputs_stats_.kept_tensors;
      inputs_stats_.kept_bytes += input_nbytes_[k];
    }
  }
  produced_.clear();
  save_outputs_.clear();
  made_here_.clear();
  for (auto& r : regions_) r.kept.clear();
  ++mutable_checkpoint_report().forwards;
  flush_stats();
}

std::optional<SlotRef> CheckpointFrame::pack(const Tensor& t) {
  auto it = produced_.find(t.storage().get());
  if (it == produced_.end() || it->second.storage.lock() != t.storage()) return std::nullopt;
  const Produced& p = it->second;
  Slot slot{.call = p.call,
            .output = p.output,
            .meta = t.meta(),
            .produced = p.meta,
            .nbytes = t.storage()->nbytes()};
  if (options_.determinism == DeterminismCheck::Values) slot.original = alias_without_history(t);
  slots_.push_back(std::move(slot));
  waiting_[p.call].push_back(slots_.size() - 1);
  return SlotRef{shared_from_this(), slots_.size() - 1};
}

void CheckpointFrame::note_kept(RegionRecord& region, const Tensor& t) {
  if (!region.kept.insert(t.storage().get()).second) return;
  ++region.stats.kept_tensors;
  region.stats.kept_bytes += t.storage()->nbytes();
}

void CheckpointFrame::note_saved_handle(const Tensor& t) {
  const Storage* s = t.storage().get();
  if (save_depth_ > 0 && made_here_.count(s)) {
    for (auto it = open_regions_.rbegin(); it != open_regions_.rend(); ++it)
      if (!regions_[*it].recompute) return note_kept(regions_[*it], t);
  }
  auto it = save_outputs_.find(s);
  if (it != save_outputs_.end() && it->second.storage.lock() == t.storage())
    note_kept(regions_[it->second.region], t);
}

void CheckpointFrame::keep_for_recompute(const Tensor& t) {
  const Storage* s = t.storage().get();
  for (std::size_t k = 0; k < inputs_.size(); ++k)
    if (inputs_[k].defined() && inputs_[k].storage().get() == s) input_needed_[k] = true;
  auto it = save_outputs_.find(s);
  if (it == save_outputs_.end() || it->second.storage.lock() != t.storage()) return;
  RegionRecord& region = regions_[it->second.region];
  RegionOutput& out = region.outputs[it->second.output];
  if (out.kept.defined()) return;
  out.kept = view_of(out.meta, t.storage());
  note_kept(region, t);
}

std::vector<Tensor> CheckpointFrame::record_region(const std::string& name, bool recompute,
                                                   const TensorsFn& fn,
                                                   const std::vector<Tensor>& inputs) {
  if (save_depth_ > 0) {
    std::string outer;
    for (auto it = open_regions_.rbegin(); it != open_regions_.rend() && outer.empty(); ++it)
      if (!regions_[*it].recompute) outer = regions_[*it].name;
    REMAT_CHECK(!recompute,
                "checkpoint '{}': region '{}' (recompute) is inside SAVE region '{}'; a SAVE "
                "region is skipped during the replay, so nothing inside it can be recomputed",
                options_.name, name, outer);
    return fn(inputs);  // SAVE inside SAVE: part of the outer region
  }
  const std::size_t r = regions_.size();
  regions_.push_back({.name = name, .recompute = recompute});
  regions_[r].stats.region = name;
  regions_[r].stats.recompute = recompute;
  if (recompute)
    for (const auto& t : inputs)
      if (t.defined()) keep_for_recompute(t);
  struct Open {
    CheckpointFrame& f;
    bool save;
    ~Open() {
      f.open_regions_.pop_back();
      if (save) --f.save_depth_;
    }
  } open{*this, !recompute};
  open_regions_.push_back(r);
  if (!recompute) ++save_depth_;
  std::vector<Tensor> outputs = fn(inputs);
  if (recompute) return outputs;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    const Tensor& t = outputs[j];
    REMAT_CHECK(t.defined(), "checkpoint '{}': SAVE region '{}' returned an undefined output {}",
                options_.name, name, j);
    RegionOutput out{.meta = t.meta(), .nbytes = t.storage()->nbytes()};
    for (std::size_t k = 0; k < inputs.size() && out.input < 0; ++k)
      if (same(t, inputs[k])) out.input = static_cast<int>(k);
    if (out.input < 0) save_outputs_[t.storage().get()] = {t.storage(), r, j};
    regions_[r].outputs.push_back(std::move(out));
  }
  return outputs;
}

void CheckpointFrame::on_record_inputs(std::span<const Tensor> inputs) {
  if (save_depth_ > 0) return;
  for (const auto& t : inputs)
    for (std::size_t k = 0; k < inputs_.size(); ++k)
      if (inputs_[k].defined() && inputs_[k].storage() == t.storage()) input_needed_[k] = true;
}

void CheckpointFrame::on_record_outputs(std::span<const Tensor> outputs, bool is_view) {
  if (is_view) return;
  for (const auto& t : outputs) made_here_.insert(t.storage().get());
  if (save_depth_ > 0) return;
  const std::uint64_t call = calls_++;
  for (std::size_t j = 0; j < outputs.size(); ++j)
    produced_[outputs[j].storage().get()] = {outputs[j].storage(), call,
                                             static_cast<std::uint32_t>(j), outputs[j].meta()};
}

// ---------------------------------------------------------------- replay

Tensor CheckpointFrame::fetch(std::size_t index) {
  Slot& slot = slots_.at(index);
  REMAT_CHECK(!slot.released,
              "checkpoint '{}': a saved tensor of shape {} was asked for after its node released "
              "it; pass retain_graph=true to backward through the graph twice",
              options_.name, slot.meta.shape);
  if (!slot.filled) replay();
  return alias_without_history(slots_[index].value);
}

void CheckpointFrame::release(std::size_t index) {
  Slot& slot = slots_.at(index);
  slot.value = Tensor();
  slot.original = Tensor();
  slot.released = true;
}

void CheckpointFrame::replay() {
  REMAT_CHECK(mode_ == Mode::Done,
              "checkpoint '{}': its replay needs a tensor that only its own replay can recreate "
              "(a backward through the checkpoint inside its own function?)",
              options_.name);
  std::vector<Tensor> inputs(inputs_.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (input_refs_[k])
      inputs[k] = input_refs_[k]->fetch();
    else if (inputs_[k].defined())
      inputs[k] = inputs_[k];
    else
      inputs[k] = make_placeholder(
          input_metas_[k], input_nbytes_[k],
          fmt::format("input {} of checkpoint '{}', which it did not keep: no recompute code "
                      "read it during the forward",
                      k, options_.name));
  }
  auto keep_alive = shared_from_this();
  const RngState outer_rng = rng_state();
  replay_calls_ = 0;
  replay_regions_ = 0;
  nested_ = 0;
  replay_open_.clear();
  struct Restore {
    CheckpointFrame& f;
    RngState rng;
    ~Restore() {
      f.mode_ = Mode::Done;
      f.created_.clear();
      if (f.options_.preserve_rng) set_rng_state(rng);
    }
  } restore{*this, outer_rng};
  if (options_.preserve_rng) set_rng_state(rng_);
  mode_ = Mode::Replaying;
  {
    NoGradGuard no_grad;
    FramePush push(this);
    fn_(inputs);
  }
  REMAT_CHECK(replay_calls_ == calls_ && replay_regions_ == regions_.size(),
              "checkpoint '{}': the replay made {} op calls and reached {} regions where the "
              "forward made {} and {}; the function must compute the same thing when it runs "
              "again",
              options_.name, replay_calls_, replay_regions_, calls_, regions_.size());
  for (const auto& s : slots_)
    REMAT_CHECK(s.filled || s.released,
                "checkpoint '{}': the replay did not recreate a saved tensor of shape {}",
                options_.name, s.meta.shape);
  ++mutable_checkpoint_report().replays;
  flush_stats();
}

std::string CheckpointFrame::replay_place() const {
  return replay_open_.empty() ? std::string("outside any region")
                              : fmt::format("in region '{}'", regions_[replay_open_.back()].name);
}

RegionReport& CheckpointFrame::replay_stats() {
  return replay_open_.empty() ? unmarked_ : regions_[replay_open_.back()].stats;
}

void CheckpointFrame::fill(Slot& slot, const Tensor& out, std::uint64_t call) {
  const TensorMeta& m = out.meta();
  REMAT_CHECK(m.shape == slot.produced.shape && m.dtype == slot.produced.dtype &&
                  out.storage()->nbytes() == slot.nbytes,
              "checkpoint '{}': op call {} of the replay ({}) made output {} of shape {} and "
              "dtype {} where the forward made shape {} and dtype {}; the function must compute "
              "the same thing when it runs again",
              options_.name, call, replay_place(), slot.output, m.shape, m.dtype,
              slot.produced.shape, slot.produced.dtype);
  slot.value = view_of(slot.meta, out.storage());
  slot.filled = true;
  if (slot.original.defined()) {
    REMAT_CHECK(same_values(slot.original, slot.value),
                "checkpoint '{}': op call {} of the replay ({}) recreated a saved tensor of shape "
                "{} with values different from the forward's; the function is not deterministic "
                "(random ops without preserve_rng, or state that changed since the forward?)",
                options_.name, call, replay_place(), slot.meta.shape);
    slot.original = Tensor();
  }
}

void CheckpointFrame::on_replay_outputs(std::span<const Tensor> outputs, bool is_view,
                                        double seconds) {
  if (is_view) return;
  const std::uint64_t call = replay_calls_++;
  for (const auto& t : outputs) created_.insert(t.storage().get());
  RegionReport& stats = replay_stats();
  ++stats.kernels_replayed;
  stats.replay_seconds += seconds;
  auto it = waiting_.find(call);
  if (it == waiting_.end()) return;
  for (std::size_t index : it->second) {
    Slot& slot = slots_[index];
    if (slot.released) continue;
    REMAT_CHECK(slot.output < outputs.size(),
                "checkpoint '{}': op call {} of the replay ({}) made {} outputs where the forward "
                "made more; the function must compute the same thing when it runs again",
                options_.name, call, replay_place(), outputs.size());
    fill(slot, outputs[slot.output], call);
  }
}

std::vector<Tensor> CheckpointFrame::replay_region(const std::string& name, bool recompute,
                                                   const TensorsFn& fn,
                                                   const std::vector<Tensor>& inputs) {
  if (nested_ > 0) return fn(inputs);  // a region of a checkpoint nested in this replay
  const std::size_t r = replay_regions_++;
  REMAT_CHECK(r < regions_.size() && regions_[r].name == name && regions_[r].recompute == recompute,
              "checkpoint '{}': the replay reached region '{}' ({}) where the forward had {}; the "
              "function must take the same path when it runs again",
              options_.name, name, policy(recompute),
              r < regions_.size()
                  ? fmt::format("region '{}' ({})", regions_[r].name, policy(regions_[r].recompute))
                  : std::string("no further region"));
  RegionRecord& region = regions_[r];
  if (recompute) {
    struct Open {
      std::vector<std::size_t>& open;
      ~Open() { open.pop_back(); }
    } open{replay_open_};
    replay_open_.push_back(r);
    return fn(inputs);
  }
  // A SAVE region is skipped: its kept outputs, or placeholders.
  std::vector<Tensor> outputs;
  outputs.reserve(region.outputs.size());
  for (std::size_t j = 0; j < region.outputs.size(); ++j) {
    const RegionOutput& out = region.outputs[j];
    if (out.input >= 0 && static_cast<std::size_t>(out.input) < inputs.size()) {
      outputs.push_back(inputs[out.input]);
    } else if (out.kept.defined()) {
      outputs.push_back(alias_without_history(out.kept));
    } else {
      outputs.push_back(make_placeholder(
          out.meta, out.nbytes,
          fmt::format("output {} of SAVE region '{}' of checkpoint '{}', which the replay skipped "
                      "without keeping it; plain code that reads it during the replay must "
                      "declare it with recompute_needs_tensor(t) first, or read it inside "
                      "region(..., recompute=true)",
                      j, name, options_.name)));
      ++region.stats.placeholders;
    }
  }
  return outputs;
}

std::vector<Tensor> CheckpointFrame::run_nested(const TensorsFn& fn,
                                                const std::vector<Tensor>& inputs) {
  struct Depth {
    int& n;
    ~Depth() { --n; }
  } depth{nested_};
  ++nested_;
  return fn(inputs);
}

bool CheckpointFrame::skip_inplace(const Tensor& self) {
  if (created_.count(self.storage().get())) return false;
  ++replay_stats().side_effects_skipped;
  return true;
}

void CheckpointFrame::flush_stats() {
  CheckpointReport& report = mutable_checkpoint_report();
  auto add = [&](RegionReport& from, bool always) {
    const bool empty = from.kept_tensors == 0 && from.kernels_replayed == 0 &&
                       from.placeholders == 0 && from.side_effects_skipped == 0;
    if (empty && !always) return;
    RegionReport& to = report.row(options_.name, from.region, from.recompute);
    to.kept_tensors += from.kept_tensors;
    to.kept_bytes += from.kept_bytes;
    to.kernels_replayed += from.kernels_replayed;
    to.replay_seconds += from.replay_seconds;
    to.placeholders += from.placeholders;
    to.side_effects_skipped += from.side_effects_skipped;
    from.kept_tensors = from.kept_bytes = from.kernels_replayed = from.placeholders = 0;
    from.side_effects_skipped = 0;
    from.replay_seconds = 0;
  };
  add(inputs_stats_, false);
  add(unmarked_, false);
  for (auto& r : regions_) add(r.stats, true);
}

// ---------------------------------------------------------------- hooks

std::optional<SlotRef> pack_saved(const Tensor& t) {
  if (t_frames.empty() || !t.defined()) return std::nullopt;
  // The innermost checkpoint that computed t decides: a slot when its recompute code did, a
  // handle when one of its SAVE regions did.  Tensors it did not compute go to the next one out.
  std::optional<SlotRef> ref;
  bool decided = false;
  for_each_recording([&](CheckpointFrame& f) {
    if (decided) return;
    ref = f.pack(t);
    decided = ref || f.made_here(t);
  });
  if (!ref && t_frames.back()->recording()) t_frames.back()->note_saved_handle(t);
  return ref;
}

bool checkpoint_active() {
  return !t_frames.empty();
}

void on_kernel_inputs(std::span<const Tensor> inputs) {
  for_each_recording([&](CheckpointFrame& f) { f.on_record_inputs(inputs); });
}

void on_op_outputs(std::span<const Tensor> outputs, bool is_view, double seconds) {
  CheckpointFrame* top = t_frames.back();
  if (top->replaying()) return top->on_replay_outputs(outputs, is_view, seconds);
  for_each_recording([&](CheckpointFrame& f) { f.on_record_outputs(outputs, is_view); });
}

bool skip_inplace(const Tensor& self) {
  CheckpointFrame* top = t_frames.back();
  return top->replaying() && top->skip_inplace(self);
}

}  // namespace detail
}  // namespace remat
