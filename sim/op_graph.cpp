#include "sim/op_graph.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace remat::sim {
namespace {

// Walks the events once, tracking which storage each tensor id names and how many handles each
// storage has; the count decides how long a constant is held and what is an output.
class Builder {
 public:
  Builder(const Program& p, CostModel cost)
      : p_(p), cost_(cost), storage_(p.tensors.size(), kUnset) {}

  OpGraph build() {
    for (const Event& e : p_.events) {
      switch (e.kind) {
        case EventKind::Constant:
          bind_new(e.tensor, OpGraph::kNone, e);
          break;
        case EventKind::Call:
          call(e);
          break;
        case EventKind::Mutate:
          mutate(e);
          break;
        case EventKind::Release:
          drop(storage(e.tensor, e));
          break;
        case EventKind::Copy:
          ++handles_[storage(e.source, e)];
          break;
        case EventKind::CopyFrom:  // a name moves from `tensor` to `source`
          ++handles_[storage(e.source, e)];
          drop(storage(e.tensor, e));
          break;
        case EventKind::Access:
          access(e, "access");
          break;
        // Pinning makes the cell resident first; that it then stays is a restriction of the
        // simulator's, which a relaxation may leave out.
        case EventKind::Pin:
          access(e, "pin");
          break;
        // A write outside an op makes the cell a constant: again only a restriction.
        case EventKind::Write:
        case EventKind::Annotate:
          break;
      }
    }
    finish();
    return std::move(g_);
  }

 private:
  static constexpr std::uint32_t kUnset = std::numeric_limits<std::uint32_t>::max();

  std::int32_t stage() const { return static_cast<std::int32_t>(g_.nodes.size()); }

  std::uint32_t storage(std::uint32_t tensor, const Event& e) const {
    REMAT_CHECK(tensor < storage_.size(), "{}: line {}: tensor id {} out of range ({} tensors)",
                p_.source, e.line, tensor, storage_.size());
    REMAT_CHECK(storage_[tensor] != kUnset, "{}: line {}: tensor {} is used before it is created",
                p_.source, e.line, p_.tensors[tensor].name);
    return storage_[tensor];
  }

  std::uint32_t bind_new(std::uint32_t tensor, std::int32_t producer, const Event& e) {
    REMAT_CHECK(tensor < storage_.size(), "{}: line {}: tensor id {} out of range ({} tensors)",
                p_.source, e.line, tensor, storage_.size());
    OpGraph::Value v;
    v.bytes = p_.tensors[tensor].bytes;
    v.producer = producer;
    v.created = stage();
    g_.values.push_back(v);
    handles_.push_back(1);
    released_at_.push_back(OpGraph::kNone);
    storage_[tensor] = static_cast<std::uint32_t>(g_.values.size() - 1);
    return storage_[tensor];
  }

  void drop(std::uint32_t v) {
    if (handles_[v] == 0) return;  // a second release of the same storage: already gone
    if (--handles_[v] == 0) released_at_[v] = stage();
  }

  // `dst` names the storage `src` names, with a reference of its own or none.
  void share(std::uint32_t dst, std::uint32_t src, const Event& e, bool reference) {
    const std::uint32_t s = storage(src, e);
    REMAT_CHECK(dst < storage_.size(), "{}: line {}: tensor id {} out of range ({} tensors)",
                p_.source, e.line, dst, storage_.size());
    storage_[dst] = s;
    if (reference) ++handles_[s];
  }

  OpGraph::Node new_node(const Event& e, std::vector<std::uint32_t> args) {
    std::vector<std::uint32_t> inputs;
    for (std::uint32_t a : args) inputs.push_back(storage(a, e));
    std::sort(inputs.begin(), inputs.end());
    inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
    OpGraph::Node n;
    n.op = e.op;
    n.inputs = std::move(inputs);
    n.cost = event_cost(e, cost_);
    n.line = e.line;
    return n;
  }

  void call(const Event& e) {
    OpGraph::Node n = new_node(e, e.args);
    const auto id = stage();
    for (std::size_t i = 0; i < e.results.size(); ++i) {
      const std::int32_t alias = i < e.aliases.size() ? e.aliases[i] : -1;
      if (alias >= 0) {
        // A view of an input: it names that input's storage and allocates nothing.
        REMAT_CHECK(static_cast<std::size_t>(alias) < e.args.size(),
                    "{}: line {}: {} result {} aliases arg {} of {}", p_.source, e.line, e.op, i,
                    alias, e.args.size());
        share(e.results[i], e.args[alias], e, true);
        continue;
      }
      const std::uint32_t v = bind_new(e.results[i], id, e);
      n.outputs.push_back(v);
      n.bytes += g_.values[v].bytes;
    }
    g_.nodes.push_back(std::move(n));
  }

  void mutate(const Event& e) {
    REMAT_CHECK(e.mutated.size() == e.mutated_results.size(),
                "{}: line {}: {} names {} mutated args but {} new tensors", p_.source, e.line, e.op,
                e.mutated.size(), e.mutated_results.size());
    for (std::uint32_t i : e.mutated)
      REMAT_CHECK(i < e.args.size(), "{}: line {}: {} mutates arg {} of {}", p_.source, e.line,
                  e.op, i, e.args.size());
    OpGraph::Node n = new_node(e, e.args);
    if (p_.origin == Origin::Trace) {
      // The framework writes in place: the new value keeps the cell and its references.  The
      // copy the pool makes when records still read the old value, and the cell turning into a
      // constant, only restrict the simulator: left out, the model stays a relaxation.
      for (std::size_t i = 0; i < e.mutated.size(); ++i)
        share(e.mutated_results[i], e.args[e.mutated[i]], e, false);
      g_.nodes.push_back(std::move(n));
      return;
    }
    // The prototype's replay: new tensors of the args' sizes; each old one then loses the
    // reference its name held and lives on for its readers.
    const auto id = stage();
    for (std::size_t i = 0; i < e.mutated.size(); ++i) {
      const std::uint32_t v = bind_new(e.mutated_results[i], id, e);
      n.outputs.push_back(v);
      n.bytes += g_.values[v].bytes;
    }
    std::vector<std::uint32_t> old;
    for (std::uint32_t i : e.mutated) old.push_back(storage(e.args[i], e));
    g_.nodes.push_back(std::move(n));
    for (std::uint32_t v : old) drop(v);
  }

  void access(const Event& e, const char* what) {
    OpGraph::Node n;
    n.op = what;
    n.inputs = {storage(e.tensor, e)};
    n.line = e.line;
    g_.nodes.push_back(std::move(n));
  }

  void finish() {
    // Only the prototype's replay needs what is still referenced resident at the end.
    for (std::size_t v = 0; v < g_.values.size(); ++v) {
      g_.values[v].output = handles_[v] > 0 && p_.origin == Origin::PrototypeLog;
      if (g_.values[v].output && g_.values[v].producer != OpGraph::kNone) g_.final_stage = true;
    }
    const auto last = static_cast<std::int32_t>(g_.stages()) - 1;
    for (std::size_t v = 0; v < g_.values.size(); ++v) {
      OpGraph::Value& val = g_.values[v];
      if (val.producer == OpGraph::kNone)
        val.held_until = handles_[v] > 0 ? last : released_at_[v] - 1;
    }
    link_readers(g_);
  }

  const Program& p_;
  CostModel cost_;
  OpGraph g_;
  std::vector<std::uint32_t> storage_;  // tensor id -> value
  std::vector<std::size_t> handles_;    // per value
  std::vector<std::int32_t>
      released_at_;  // per value: stage at whose start its last handle was gone
};

}  // namespace

void link_readers(OpGraph& g) {
  const auto last = static_cast<std::int32_t>(g.stages()) - 1;
  for (auto& val : g.values) {
    val.readers.clear();
    val.live_until = val.output ? last : OpGraph::kNone;
  }
  for (std::size_t k = 0; k < g.nodes.size(); ++k)
    for (std::uint32_t v : g.nodes[k].inputs) {
      g.values[v].readers.push_back(static_cast<std::uint32_t>(k));
      g.values[v].live_until = std::max(g.values[v].live_until, static_cast<std::int32_t>(k));
    }
  // A value is of use as long as something computed from it is: recomputing that reads it.
  for (std::size_t k = g.nodes.size(); k-- > 0;) {
    std::int32_t out_live = OpGraph::kNone;
    for (std::uint32_t w : g.nodes[k].outputs)
      out_live = std::max(out_live, g.values[w].live_until);
    for (std::uint32_t v : g.nodes[k].inputs)
      g.values[v].live_until = std::max(g.values[v].live_until, out_live);
  }
}

double OpGraph::baseline_compute() const {
  return std::accumulate(nodes.begin(), nodes.end(), 0.0,
                         [](double s, const Node& n) { return s + n.cost; });
}

OpGraph build_op_graph(const Program& program, CostModel cost) {
  return Builder(program, cost).build();
}

}  // namespace remat::sim
