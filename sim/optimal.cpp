// The Checkmate MIP (Jain et al. 2020) over an OpGraph.  Stage t runs node t's original call
// last, after any recomputations of earlier nodes in program order.  Variables:
//   R[t,k]  node k computed in stage t (R[t,t] = 1; only while one of its results is of use)
//   S[t,v]  value v resident at the start of stage t (fixed 1 while a constant is held)
//   FREE[t,v,k]  v freed right after computing k in stage t (continuous: R, S are integral)
//   U[t,k]  bytes resident while k is computed in stage t: inputs and outputs at once
// The stage-by-stage memory follows Checkmate; docs/simulator.md states the assumptions.
#include "sim/optimal.h"

#include <chrono>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "core/error.h"
#include "sim/cbc_solve.h"
#include "sim/greedy_schedule.h"
#include "sim/sinks.h"

namespace remat::sim {
namespace {

using detail::kInf;
using detail::MipModel;
using detail::MipSolution;

// A model term: a column, or a constant 0 or 1.
struct Var {
  int col = -1;
  double fixed = 0;
  bool is_col() const { return col >= 0; }
  bool zero() const { return !is_col() && fixed == 0; }
};

// Sum of coef * var with the fixed parts folded into a constant.
struct Linear {
  MipModel::Terms terms;
  double constant = 0;
  Linear& add(double coef, Var v) {
    if (v.is_col())
      terms.emplace_back(v.col, coef);
    else
      constant += coef * v.fixed;
    return *this;
  }
};

class Checkmate {
 public:
  Checkmate(const OpGraph& g, std::size_t budget_bytes)
      : g_(g), n_(g.nodes.size()), T_(g.stages()) {
    std::size_t unit = 0;  // memory in units of the sizes' gcd keeps coefficients small and exact
    for (const auto& v : g.values) unit = std::gcd(unit, v.bytes);
    unit_ = unit ? unit : 1;
    cap_ = static_cast<double>(budget_bytes / unit_);
  }

  // False when some call's pinned working set exceeds the budget: every schedule, the
  // simulator's included, holds the call's inputs, its outputs and the held constants at once.
  bool working_set_fits() const {
    for (std::size_t t = 0; t < T_; ++t) {
      std::vector<char> counted(g_.values.size(), 0);
      double bytes = 0;
      auto count = [&](std::uint32_t v) {
        if (!counted[v]) counted[v] = 1, bytes += size(v);
      };
      if (t < n_) {
        for (std::uint32_t v : g_.nodes[t].inputs) count(v);
        bytes += mem(t);
      } else {
        for (std::size_t v = 0; v < g_.values.size(); ++v)
          if (g_.values[v].output) count(static_cast<std::uint32_t>(v));
      }
      for (std::size_t v = 0; v < g_.values.size(); ++v) {
        const auto& val = g_.values[v];
        if (g_.is_constant(static_cast<std::uint32_t>(v)) &&
            val.created <= static_cast<std::int32_t>(t) &&
            static_cast<std::int32_t>(t) <= val.held_until)
          count(static_cast<std::uint32_t>(v));
      }
      if (bytes > cap_) return false;
    }
    return true;
  }

  void build() {
    make_r();
    make_s();
    for (std::size_t t = 0; t < T_; ++t) dependencies(t);
    retention();
    for (std::size_t t = 0; t < T_; ++t) memory(t);
  }

  const MipModel& model() const { return m_; }
  void set_start(MipModel::Terms values) { m_.set_start(std::move(values)); }
  bool trivially_infeasible() const { return violated_; }

  // The integer columns of a schedule (as play_schedule takes it), or nullopt when it does
  // something the model leaves out (a node twice in a stage, a recomputation of no use).
  std::optional<MipModel::Terms> encode(const std::vector<std::uint32_t>& steps) const {
    MipModel::Terms values;
    std::vector<std::size_t> stage_of(steps.size()), first(T_ + 1, steps.size());
    std::vector<std::vector<std::size_t>> runs(n_);  // steps computing each node
    std::vector<std::vector<char>> done(T_, std::vector<char>(n_, 0));
    std::size_t frontier = 0;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::size_t k = steps[i];
      stage_of[i] = frontier;
      first[frontier] = std::min(first[frontier], i);
      if (done[frontier][k]) return std::nullopt;
      done[frontier][k] = 1;
      const Var r = R_[frontier][k];
      if (r.zero()) return std::nullopt;
      if (r.is_col()) values.emplace_back(r.col, 1);
      runs[k].push_back(i);
      if (k == frontier) ++frontier;
    }
    for (std::size_t t = T_; t-- > 0;) first[t] = std::min(first[t], first[t + 1]);
    std::vector<std::vector<std::size_t>> reads(g_.values.size());
    for (std::size_t i = 0; i < steps.size(); ++i)
      for (std::uint32_t v : g_.nodes[steps[i]].inputs) reads[v].push_back(i);
    for (std::size_t v = 0; v < g_.values.size(); ++v) {
      const std::int32_t p = g_.values[v].producer;
      for (std::size_t t = 0; t < T_; ++t) {
        if (!S_[t][v].is_col()) continue;
        const std::size_t from = first[t];
        std::size_t until = steps.size();  // the next computation of its producer
        bool kept;
        if (p == OpGraph::kNone) {
          kept = !reads[v].empty() && reads[v].back() >= from;
        } else {
          const auto& r = runs[static_cast<std::size_t>(p)];
          auto next = std::lower_bound(r.begin(), r.end(), from);
          if (next == r.begin()) continue;  // not computed before the stage
          if (next != r.end()) until = *next;
          auto read = std::lower_bound(reads[v].begin(), reads[v].end(), from);
          kept = (read != reads[v].end() && *read < until) ||
                 (g_.values[v].output && until == steps.size());
        }
        if (kept) values.emplace_back(S_[t][v].col, 1);
      }
    }
    return values;
  }

  std::vector<std::uint32_t> decode(const std::vector<double>& x) const {
    std::vector<std::uint32_t> steps;
    for (std::size_t t = 0; t < T_; ++t)
      for (std::size_t k = 0; k < n_; ++k) {
        const Var r = R_[t][k];
        if ((r.is_col() && x[r.col] > 0.5) || (!r.is_col() && r.fixed == 1))
          steps.push_back(static_cast<std::uint32_t>(k));
      }
    return steps;
  }

 private:
  double size(std::uint32_t v) const { return static_cast<double>(g_.values[v].bytes / unit_); }
  double mem(std::size_t k) const { return static_cast<double>(g_.nodes[k].bytes / unit_); }
  static Var one() { return {-1, 1}; }
  Var binary(double obj) { return {m_.add_col(0, 1, obj, true), 0}; }

  void make_r() {
    R_.assign(T_, std::vector<Var>(n_));
    for (std::size_t k = 0; k < n_; ++k) {
      R_[k][k] = one();
      std::int32_t live = OpGraph::kNone;  // recomputing k is of use while a result of it is
      for (std::uint32_t w : g_.nodes[k].outputs) live = std::max(live, g_.values[w].live_until);
      for (std::size_t t = k + 1; t < T_ && static_cast<std::int32_t>(t) <= live; ++t)
        R_[t][k] = binary(g_.nodes[k].cost);
    }
  }

  // S[t] for t in 0..T; S[T] says what must be resident when the run ends.
  void make_s() {
    S_.assign(T_ + 1, std::vector<Var>(g_.values.size()));
    for (std::size_t v = 0; v < g_.values.size(); ++v) {
      const auto& val = g_.values[v];
      const bool constant = val.producer == OpGraph::kNone;
      const std::int32_t from = constant ? val.created : val.producer + 1;
      for (std::int32_t t = from; t < static_cast<std::int32_t>(T_); ++t) {
        if (constant && t <= val.held_until)
          S_[t][v] = one();
        else if (t <= val.live_until)
          S_[t][v] = binary(0);
      }
      if (val.output) S_[T_][v] = one();
    }
  }

  void row_le(const Linear& l, double rhs) {
    if (l.terms.empty()) {
      if (l.constant > rhs + 1e-9) violated_ = true;
      return;
    }
    m_.add_row(l.terms, -kInf, rhs - l.constant);
  }

  // A node computed in stage t finds each input computed earlier in the stage or resident.
  void dependencies(std::size_t t) {
    for (std::size_t k = 0; k < n_; ++k) {
      if (R_[t][k].zero()) continue;
      for (std::uint32_t v : g_.nodes[k].inputs) {
        Linear l;
        l.add(1, R_[t][k]).add(-1, S_[t][v]);
        if (!g_.is_constant(v)) l.add(-1, R_[t][static_cast<std::size_t>(g_.values[v].producer)]);
        row_le(l, 0);
      }
    }
  }

  // Resident at the start of stage t+1 only if computed or resident in stage t; a constant,
  // once freed, is gone.
  void retention() {
    for (std::size_t v = 0; v < g_.values.size(); ++v) {
      const auto& val = g_.values[v];
      for (std::size_t t = 0; t < T_; ++t) {
        const Var next = S_[t + 1][v];
        if (next.zero()) continue;
        if (g_.is_constant(static_cast<std::uint32_t>(v))) {
          if (static_cast<std::int32_t>(t) < val.created || !S_[t][v].is_col()) continue;
          Linear l;
          row_le(l.add(1, next).add(-1, S_[t][v]), 0);
        } else {
          if (static_cast<std::int32_t>(t) <= val.producer) continue;
          Linear l;
          row_le(l.add(1, next)
                     .add(-1, S_[t][v])
                     .add(-1, R_[t][static_cast<std::size_t>(val.producer)]),
                 0);
        }
      }
    }
  }

  // U after each computation of stage t, in program order; a value is freed after its last
  // reader computed in the stage when it is not kept for the next stage.
  void memory(std::size_t t) {
    std::vector<std::size_t> positions;
    for (std::size_t k = 0; k < n_; ++k)
      if (!R_[t][k].zero()) positions.push_back(k);
    if (positions.empty()) return;
    std::vector<MipModel::Terms> freed(n_);  // FREE columns, by the node after which they free
    for (std::size_t v = 0; v < g_.values.size(); ++v)
      frees(t, static_cast<std::uint32_t>(v), freed);

    int prev = -1;
    for (std::size_t i = 0; i < positions.size(); ++i) {
      const std::size_t k = positions[i];
      const int u = m_.add_col(0, cap_, 0, false);
      Linear l;  // U[t,k] >= what was there + outputs of k  (- frees after the previous one)
      l.add(1, {u, 0}).add(-mem(k), R_[t][k]);
      if (prev < 0) {
        for (std::size_t v = 0; v < g_.values.size(); ++v)
          l.add(-size(static_cast<std::uint32_t>(v)), S_[t][v]);
      } else {
        l.add(-1, {prev, 0});
        for (const auto& [col, coef] : freed[positions[i - 1]]) l.add(coef, {col, 0});
      }
      m_.add_row(l.terms, -l.constant, kInf);
      prev = u;
    }
  }

  void frees(std::size_t t, std::uint32_t v, std::vector<MipModel::Terms>& freed) {
    const auto& val = g_.values[v];
    const Var keep = S_[t + 1][v];
    if (!keep.is_col() && keep.fixed == 1) return;
    const bool constant = g_.is_constant(v);
    if (constant && static_cast<std::int32_t>(t) <= val.held_until) return;
    const Var producer = constant ? Var{} : R_[t][static_cast<std::size_t>(val.producer)];
    if (S_[t][v].zero() && producer.zero()) return;  // not in this stage
    std::vector<std::size_t> at;
    if (!producer.zero()) at.push_back(static_cast<std::size_t>(val.producer));
    for (std::uint32_t j : val.readers)
      if (!R_[t][j].zero()) at.push_back(j);
    for (std::size_t a = 0; a < at.size(); ++a) {
      const std::size_t k = at[a];
      bool possible = true;
      for (std::size_t b = a + 1; b < at.size(); ++b) possible &= R_[t][at[b]].is_col();
      if (!possible) continue;  // a later reader always runs in this stage
      const int f = m_.add_col(0, 1, 0, false);
      if (R_[t][k].is_col()) m_.add_row({{f, 1}, {R_[t][k].col, -1}}, -kInf, 0);
      if (keep.is_col()) m_.add_row({{f, 1}, {keep.col, 1}}, -kInf, 1);
      for (std::size_t b = a + 1; b < at.size(); ++b)
        m_.add_row({{f, 1}, {R_[t][at[b]].col, 1}}, -kInf, 1);
      freed[k].emplace_back(f, size(v));
    }
  }

  const OpGraph& g_;
  std::size_t n_, T_;
  std::size_t unit_ = 1;
  double cap_ = 0;
  MipModel m_;
  std::vector<std::vector<Var>> R_, S_;
  bool violated_ = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

OptimalSchedule optimal_schedule(const OpGraph& graph, std::size_t budget_bytes,
                                 double time_limit_seconds,
                                 const std::vector<std::vector<std::uint32_t>>& starts) {
  const auto t0 = std::chrono::steady_clock::now();
  OptimalSchedule out{{OptimalResult::Status::TooLarge}, {}};
  auto done = [&](OptimalResult::Status status) {
    out.result.status = status;
    out.result.seconds = seconds_since(t0);
    return out;
  };
  // The MIP runs first on the graph less its sinks (a relaxation, sim/sinks.h): its schedules
  // come back with the sinks put in and count only when the whole graph's replay fits.
  // When that does not prove an optimum, the whole graph's MIP gets the time left.
  const Sinks reduced = without_sinks(graph);
  if (reduced.graph.nodes.size() > kMaxOptimalCalls) return done(OptimalResult::Status::TooLarge);
  Checkmate whole(graph, budget_bytes);
  if (!whole.working_set_fits()) return done(OptimalResult::Status::Infeasible);
  Checkmate cm(reduced.graph, budget_bytes);
  cm.build();
  if (cm.trivially_infeasible()) return done(OptimalResult::Status::Infeasible);
  const double baseline = graph.baseline_compute();
  if (cm.model().cols().empty()) {  // no call to place: nothing to choose
    out.result.compute = out.result.lower_bound = baseline;
    for (std::uint32_t k = 0; k < graph.nodes.size(); ++k) out.steps.push_back(k);
    return done(OptimalResult::Status::Optimal);
  }
  // A schedule of the whole graph's and its compute when it fits the budget.
  auto fits = [&](const std::vector<std::uint32_t>& steps) -> std::optional<double> {
    try {
      const ScheduleCost c = play_schedule(graph, steps);
      if (c.peak_bytes <= budget_bytes) return c.compute;
    } catch (const Error&) {
      // a given start the graph's rules refuse (e.g. a write the replay made a copy of)
    }
    return std::nullopt;
  };
  out.result.compute = kInf;
  auto consider = [&](std::optional<std::vector<std::uint32_t>> steps) {
    if (!steps) return;
    const auto c = fits(*steps);
    if (c && *c < out.result.compute - 1e-9) out.result.compute = *c, out.steps = std::move(*steps);
  };
  for (const auto& steps : starts) consider(steps);
  consider(chen_schedule(graph, budget_bytes));
  consider(greedy_schedule(graph, budget_bytes, GreedyRule::CheapestPerByte));
  consider(greedy_schedule(graph, budget_bytes, GreedyRule::FurthestUse));
  const bool started = !out.steps.empty();
  double bound = baseline;
  // Solves `model` from the best schedule so far; true when it proves that schedule optimal, or
  // proves that no schedule fits (out.steps then stays empty).
  auto solve = [&](Checkmate& model, const Sinks* dropped) {
    if (!out.steps.empty()) {
      auto values =
          dropped ? model.encode(drop_sinks(*dropped, out.steps)) : model.encode(out.steps);
      if (values) model.set_start(std::move(*values));
    }
    const double remaining = std::max(0.0, time_limit_seconds - seconds_since(t0));
    const MipSolution s = detail::solve_with_cbc(model.model(), remaining);
    if (s.status == MipSolution::Status::Infeasible) {
      REMAT_CHECK(!started,
                  "optimal_compute: CBC finds no schedule within {} bytes, yet one of compute {} "
                  "fits: the model is wrong",
                  budget_bytes, out.result.compute);
      return true;
    }
    bound = std::max(bound, std::max(s.bound, 0.0) + baseline);
    // The columns cover recomputations only: every call's first run is the baseline.
    const double objective = s.objective + baseline;
    if (!dropped) {  // the whole graph's model: its optimum is the answer, as the model states it
      if (!s.x.empty() && objective < out.result.compute - 1e-9)
        out.result.compute = objective, out.steps = model.decode(s.x);
      return s.status == MipSolution::Status::Optimal;
    }
    // The smaller graph's: its schedules count only when the whole graph's replay fits.
    if (!s.x.empty()) consider(with_sinks(graph, *dropped, model.decode(s.x)));
    return s.status == MipSolution::Status::Optimal && out.result.compute <= objective + 1e-9;
  };
  const bool dropped = reduced.graph.nodes.size() < graph.nodes.size();
  bool proven = solve(cm, dropped ? &reduced : nullptr);  // with none dropped, it is the whole
  if (!proven && dropped && seconds_since(t0) < time_limit_seconds &&
      graph.nodes.size() <= kMaxOptimalCalls) {
    whole.build();
    proven = solve(whole, nullptr);
  }
  if (out.steps.empty() && proven) return done(OptimalResult::Status::Infeasible);
  out.result.lower_bound = proven ? out.result.compute : std::min(bound, out.result.compute);
  return done(proven ? OptimalResult::Status::Optimal : OptimalResult::Status::TimeLimit);
}

OptimalResult optimal_compute(const Program& program, std::size_t budget_bytes, CostModel cost,
                              double time_limit_seconds,
                              const std::vector<std::vector<std::size_t>>& starts) {
  const auto t0 = std::chrono::steady_clock::now();
  const OpGraph graph = build_op_graph(program, cost);
  // Input lines to node ids: every node is one event's (calls, mutations, pins, accesses).
  std::unordered_map<std::size_t, std::uint32_t> node_of_line;
  for (std::uint32_t k = 0; k < graph.nodes.size(); ++k) node_of_line[graph.nodes[k].line] = k;
  std::vector<std::vector<std::uint32_t>> node_starts;
  for (const auto& lines : starts) {
    std::vector<std::uint32_t> steps;
    bool known = true;
    for (const std::size_t line : lines) {
      const auto it = node_of_line.find(line);
      if (it == node_of_line.end()) {
        known = false;
        break;
      }
      steps.push_back(it->second);
    }
    if (known) node_starts.push_back(std::move(steps));
  }
  OptimalResult r = optimal_schedule(graph, budget_bytes, time_limit_seconds, node_starts).result;
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace remat::sim
