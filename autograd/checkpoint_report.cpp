#include "autograd/checkpoint_report.h"

#include <fmt/format.h>

namespace remat {
namespace {

thread_local CheckpointReport t_report;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

RegionReport& CheckpointReport::row(const std::string& checkpoint, const std::string& region,
                                    bool recompute) {
  for (auto& r : regions)
    if (r.checkpoint == checkpoint && r.region == region) return r;
  regions.push_back({.checkpoint = checkpoint, .region = region, .recompute = recompute});
  return regions.back();
}

const RegionReport* CheckpointReport::find(const std::string& checkpoint,
                                           const std::string& region) const {
  for (const auto& r : regions)
    if (r.checkpoint == checkpoint && r.region == region) return &r;
  return nullptr;
}

std::string CheckpointReport::to_string() const {
  std::string out = fmt::format("checkpoints: {} forward(s), {} replay(s)\n", forwards, replays);
  out += fmt::format("{:<14} {:<18} {:<9} {:>6} {:>11} {:>8} {:>10} {:>12} {:>8}\n", "checkpoint",
                     "region", "policy", "kept", "kept MiB", "replayed", "replay ms",
                     "placeholders", "skipped");
  for (const auto& r : regions)
    out += fmt::format("{:<14} {:<18} {:<9} {:>6} {:>11.3f} {:>8} {:>10.3f} {:>12} {:>8}\n",
                       r.checkpoint, r.region, r.recompute ? "recompute" : "save", r.kept_tensors,
                       static_cast<double>(r.kept_bytes) / 1048576.0, r.kernels_replayed,
                       r.replay_seconds * 1e3, r.placeholders, r.side_effects_skipped);
  return out;
}

std::string CheckpointReport::to_json() const {
  std::string out =
      fmt::format("{{\"forwards\":{},\"replays\":{},\"regions\":[", forwards, replays);
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const auto& r = regions[i];
    out += fmt::format(
        "{}{{\"checkpoint\":{},\"region\":{},\"policy\":\"{}\",\"kept_tensors\":{},"
        "\"kept_bytes\":{},\"kernels_replayed\":{},\"replay_seconds\":{},\"placeholders\":{},"
        "\"side_effects_skipped\":{}}}",
        i ? "," : "", json_string(r.checkpoint), json_string(r.region),
        r.recompute ? "recompute" : "save", r.kept_tensors, r.kept_bytes, r.kernels_replayed,
        r.replay_seconds, r.placeholders, r.side_effects_skipped);
  }
  return out + "]}";
}

const CheckpointReport& checkpoint_report() {
  return t_report;
}
void reset_checkpoint_report() {
  t_report = {};
}

namespace detail {
CheckpointReport& mutable_checkpoint_report() {
  return t_report;
}
}  // namespace detail

}  // namespace remat
