#include "sim/lower_bound.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "sim/cbc_solve.h"

namespace remat::sim {
namespace {

using detail::kInf;
using detail::MipModel;
using detail::MipSolution;

// A stretch of stages in which a value is resident or absent at the price of one recomputation:
// strictly between two reads of it (its creation counting as the first).
struct Absence {
  std::int32_t first, last;  // stages, inclusive
  double bytes;
  double cost;  // the producer's cost, shared among its outputs by bytes
};

struct Stages {
  std::vector<double> held;   // bytes that must be resident at each stage
  std::vector<double> cover;  // bytes that may be absent at each stage
};

std::vector<Absence> absences_of(const OpGraph& g) {
  std::vector<Absence> out;
  const auto final_stage = static_cast<std::int32_t>(g.nodes.size());
  for (const auto& v : g.values) {
    if (v.producer == OpGraph::kNone || v.bytes == 0) continue;
    const auto& node = g.nodes[static_cast<std::size_t>(v.producer)];
    const double share =
        node.bytes ? node.cost * static_cast<double>(v.bytes) / static_cast<double>(node.bytes) : 0;
    std::vector<std::int32_t> reads(v.readers.begin(), v.readers.end());
    if (v.output) reads.push_back(final_stage);
    std::int32_t prev = v.producer;
    for (std::int32_t r : reads) {
      if (r > prev + 1) out.push_back({prev + 1, r - 1, static_cast<double>(v.bytes), share});
      prev = std::max(prev, r);
    }
  }
  return out;
}

// What each stage must hold (the node's inputs and outputs, held constants; at the final stage
// the outputs) and what it may shed (values between reads).
Stages stages_of(const OpGraph& g, const std::vector<Absence>& absences) {
  const std::size_t T = g.stages();
  Stages s{std::vector<double>(T + 1, 0), std::vector<double>(T + 1, 0)};
  std::vector<double> held_delta(T + 1, 0);
  auto held_constant = [&](std::uint32_t v, std::size_t t) {
    const auto& val = g.values[v];
    return g.is_constant(v) && val.created <= static_cast<std::int32_t>(t) &&
           static_cast<std::int32_t>(t) <= val.held_until;
  };
  for (const auto& val : g.values) {
    if (val.producer != OpGraph::kNone || val.held_until < val.created) continue;
    const auto from = static_cast<std::size_t>(std::max(val.created, 0));
    const auto to = std::min(static_cast<std::size_t>(val.held_until), T - 1);
    if (from > to) continue;
    held_delta[from] += static_cast<double>(val.bytes);
    held_delta[to + 1] -= static_cast<double>(val.bytes);
  }
  double running = 0;
  for (std::size_t t = 0; t < T; ++t) s.held[t] = running += held_delta[t];
  for (std::size_t t = 0; t < g.nodes.size(); ++t) {
    const auto& node = g.nodes[t];
    for (std::uint32_t v : node.inputs)
      if (!held_constant(v, t)) s.held[t] += static_cast<double>(g.values[v].bytes);
    s.held[t] += static_cast<double>(node.bytes);
  }
  if (g.final_stage)
    for (std::size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].output && !held_constant(static_cast<std::uint32_t>(v), T - 1))
        s.held[T - 1] += static_cast<double>(g.values[v].bytes);
  std::vector<double> cover_delta(T + 1, 0);
  for (const Absence& a : absences) {
    cover_delta[static_cast<std::size_t>(a.first)] += a.bytes;
    cover_delta[static_cast<std::size_t>(a.last) + 1] -= a.bytes;
  }
  running = 0;
  for (std::size_t t = 0; t < T; ++t) s.cover[t] = running += cover_delta[t];
  s.held.resize(T);
  s.cover.resize(T);
  return s;
}

// One stage alone: the cheapest bytes per unit of cost first (a fractional knapsack).
double single_stage_bound(const std::vector<Absence>& absences, std::size_t t, double excess) {
  std::vector<const Absence*> at;
  for (const Absence& a : absences)
    if (a.first <= static_cast<std::int32_t>(t) && static_cast<std::int32_t>(t) <= a.last)
      at.push_back(&a);
  std::sort(at.begin(), at.end(), [](const Absence* x, const Absence* y) {
    return x->cost * y->bytes < y->cost * x->bytes;
  });
  double cost = 0;
  for (const Absence* a : at) {
    if (excess <= 0) break;
    const double take = std::min(excess, a->bytes);
    cost += a->cost * take / a->bytes;
    excess -= take;
  }
  return cost;
}

}  // namespace

RecomputeBound recompute_lower_bound(const OpGraph& g, std::size_t budget_bytes,
                                     double time_limit_seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  RecomputeBound out;
  const std::vector<Absence> absences = absences_of(g);
  const Stages s = stages_of(g, absences);
  const double budget = static_cast<double>(budget_bytes);
  std::vector<std::size_t> binding;  // stages with an excess
  for (std::size_t t = 0; t < s.held.size(); ++t) {
    const double excess = s.held[t] + s.cover[t] - budget;
    if (excess <= 0) continue;
    if (s.held[t] > budget) {
      out.status = RecomputeBound::Status::Infeasible;
      out.stage = static_cast<std::int32_t>(t);
      out.seconds = seconds();
      return out;
    }
    binding.push_back(t);
  }
  out.binding_stages = binding.size();
  if (binding.empty()) {
    out.seconds = seconds();
    return out;
  }
  // Rows in MiB keep the coefficients near 1.
  constexpr double kUnit = 1.0 / (1 << 20);
  MipModel m;
  std::vector<MipModel::Terms> rows(binding.size());
  for (const Absence& a : absences) {
    const auto lo =
        std::lower_bound(binding.begin(), binding.end(), static_cast<std::size_t>(a.first));
    const auto hi =
        std::upper_bound(binding.begin(), binding.end(), static_cast<std::size_t>(a.last));
    if (lo == hi) continue;
    const int col = m.add_col(0, 1, a.cost, false);
    ++out.absences;
    for (auto it = lo; it != hi; ++it)
      rows[static_cast<std::size_t>(it - binding.begin())].push_back({col, a.bytes * kUnit});
  }
  for (std::size_t i = 0; i < binding.size(); ++i) {
    const std::size_t t = binding[i];
    m.add_row(rows[i], (s.held[t] + s.cover[t] - budget) * kUnit, kInf);
  }
  const double left = std::max(1.0, time_limit_seconds - seconds());
  const MipSolution sol = detail::solve_with_cbc(m, left);
  if (sol.status == MipSolution::Status::Optimal) {
    out.recompute = sol.objective;
  } else {
    // The LP did not finish: the best single stage, a weaker bound.
    out.status = RecomputeBound::Status::TimeLimit;
    for (std::size_t t : binding)
      out.recompute =
          std::max(out.recompute, single_stage_bound(absences, t, s.held[t] + s.cover[t] - budget));
  }
  out.seconds = seconds();
  return out;
}

}  // namespace remat::sim
