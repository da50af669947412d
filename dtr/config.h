// Settings of the DTR cache: budget, eviction heuristic, deallocation policy, cost model, and
// the parser of budget strings shared by every program ("300MiB", "1.5GB", "123456", "0.4",
// "none").  Usage: auto b = parse_budget("0.4"); if (b.fraction) ... else pool.set_budget(b.bytes);
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

enum class Heuristic : std::uint8_t {
  Dtr,
  DtrEq,
  DtrLocal,
  Lru,
  Largest,
  Msps,
  EStar,
  Random,
  DtrNext
};
enum class DeallocPolicy : std::uint8_t { EagerEvict, Banish, Ignore };
enum class CostModel : std::uint8_t { Time, Flops, Bytes, Unit };

// Names as on the command line: dtr, dtr-eq, dtr-local, lru, largest, msps, estar, random,
// dtr-next.
std::string_view heuristic_name(Heuristic h);
Heuristic heuristic_from_name(std::string_view name);
const std::vector<Heuristic>& all_heuristics();
std::string_view policy_name(DeallocPolicy p);  // eager-evict, banish, ignore
DeallocPolicy policy_from_name(std::string_view name);
std::string_view cost_model_name(CostModel c);  // time, flops, bytes, unit
CostModel cost_model_from_name(std::string_view name);
// DtrConfig::swap_cost_per_byte for a link of `gb_per_second` (10^9 bytes a second): seconds a
// byte, so only under the time cost model; throws remat::Error naming the flag otherwise.
double swap_cost_per_byte(double gb_per_second, CostModel model, std::string_view cost_flag);

// A parsed --budget value: none, an absolute byte count, or a fraction of the unbudgeted peak.
struct BudgetSpec {
  std::optional<std::size_t> bytes = std::nullopt;
  std::optional<double> fraction = std::nullopt;
  bool none() const { return !bytes && !fraction; }
  // Bytes for a given unbudgeted peak (fractions), or the absolute value.
  std::optional<std::size_t> resolve(std::size_t unbudgeted_peak) const;
  std::string str() const;
};
// Accepts "none", plain bytes ("123456"), units B/KB/MB/GB/TB (powers of 1000) and
// KiB/MiB/GiB/TiB (powers of 1024), with decimals ("1.5GB"), and fractions in (0, 1]
// written with a decimal point ("0.4", "1.0").  Throws remat::Error naming the bad text.
BudgetSpec parse_budget(std::string_view text);

struct DtrConfig {
  std::optional<std::size_t> budget = std::nullopt;  // unlimited when empty
  Heuristic heuristic = Heuristic::DtrEq;
  DeallocPolicy policy = DeallocPolicy::EagerEvict;
  CostModel cost = CostModel::Time;
  std::uint64_t seed = 0;  // for sampling and the random heuristic
  // Candidates scored per eviction: 0 samples max(256, ceil(2 sqrt(n))) of the n evictable
  // cells (all of them when n is smaller); any other value samples that many; SIZE_MAX scores
  // every candidate.  In replays of the prototype's logs 256 samples match a full scan, while
  // 64 thrashed on InceptionV4 and the LSTM at 0.3 of the peak where a full scan did not.
  std::size_t sample = 0;
  // For tests: after every op call, evict every cell that can be evicted, so each later read
  // rematerializes and any replay that differs from its first run shows.
  bool evict_after_every_op = false;
  // The DTR prototype's simulator's rules, for dtr_sim --prototype (docs/simulator.md):
  // staleness on a clock of accumulated compute cost (in units of 1e-9 of the cost model)
  // instead of one tick per access, with a value made at this instant never chosen first;
  // a rematerialized value keeps the access stamp it had; one victim per search (no batch of
  // tiny cells).
  bool compute_clock = false;
  bool keep_stamp_on_remat = false;
  bool single_victim = false;
  // Its graph never forgets a tensor: a released value stays, evicted, a neighbour of its
  // parents and children (so its evicted class adds to their e*) until the pool goes.  Ours
  // drops a cell once no tensor and no record of a live cell refers to it.
  bool retain_released = false;
  // Its rematerialization stamps every input of a record at the start, before recomputing the
  // missing ones (so a rebuilt chain shares the clock reading of its start); ours stamps each
  // input when it is pinned, after what lies below it was recomputed.
  bool stamp_inputs_first = false;
  // Swapping: a resident value that cannot be recomputed (a parameter, optimizer state, a
  // gradient waiting in the autograd engine, loaded data), unpinned and held by a tensor or a
  // reader, may move to host memory outside the budget, the longest unused first, and comes
  // back on its next access.  Budgets below what those values hold then run.  Off by default:
  // on the CPU the host memory is the same memory, so the budget then bounds only the pool.
  bool swap = false;
  // 0: swapping comes before any eviction.  Otherwise what a byte copied costs, each way, in the
  // cost model's units (seconds under the time model: one over the link's bandwidth), and
  // swapping is one more kind of eviction: the swap is scored by the heuristic as a candidate
  // whose cost is its two copies (out and back) and whose evicted neighbourhood is empty, and
  // happens only when it scores below the best eviction candidate (DTR's paper, section 6).
  double swap_cost_per_byte = 0;
};

}  // namespace remat
