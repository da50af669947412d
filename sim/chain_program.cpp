// chain_program (declared in sim/optimal.h): the dtr_chain example's trace, built directly so
// tests and references need neither the example nor a trace file.  Checked line by line against
// `dtr_chain --length 5` with the pool tracing.
#include <string>

#include "sim/optimal.h"

namespace remat::sim {
namespace {

class ChainRecorder {
 public:
  explicit ChainRecorder(std::size_t bytes) : bytes_(bytes) {
    p_.source = "dtr_chain";
    p_.origin = Origin::Trace;
    Event e = event(EventKind::Annotate);
    e.op = "START";
    p_.events.push_back(e);
  }

  std::uint32_t constant() {
    const std::uint32_t t = tensor();
    Event e = event(EventKind::Constant);
    e.tensor = t;
    p_.events.push_back(e);
    return t;
  }
  std::uint32_t call(const char* op, std::vector<std::uint32_t> args) {
    const std::uint32_t t = tensor();
    Event e = event(EventKind::Call);
    e.op = op;
    e.args = std::move(args);
    e.results = {t};
    e.aliases = {-1};
    e.seconds = e.flops = e.bytes = 1;  // one unit in every cost model
    e.time_ns = 1e9;
    p_.events.push_back(e);
    return t;
  }
  void on(EventKind kind, std::uint32_t t) {
    Event e = event(kind);
    e.tensor = t;
    p_.events.push_back(e);
  }
  Program take() { return std::move(p_); }

 private:
  std::uint32_t tensor() {
    p_.tensors.push_back({"x" + std::to_string(p_.tensors.size() + 1), bytes_});
    return static_cast<std::uint32_t>(p_.tensors.size() - 1);
  }
  Event event(EventKind kind) {
    Event e;
    e.kind = kind;
    e.line = p_.events.size() + 1;
    return e;
  }

  std::size_t bytes_;
  Program p_;
};

}  // namespace

Program chain_program(std::size_t n, std::size_t tensor_bytes) {
  ChainRecorder r(tensor_bytes);
  // act[i] is the input of chain call i; act[n] the chain's output.
  std::vector<std::uint32_t> act{r.constant()};
  for (std::size_t i = 0; i < n; ++i) act.push_back(r.call("chain", {act[i]}));
  const std::uint32_t seed = r.call("full", {});
  std::uint32_t grad = seed;
  for (std::size_t i = n; i-- > 0;) {
    const std::uint32_t next = r.call("chain_grad", {grad, act[i]});
    if (grad != seed) r.on(EventKind::Release, grad);
    if (i > 0) r.on(EventKind::Release, act[i]);
    grad = next;
  }
  // x.grad takes the last gradient (pinned), the seed dies, the check reads x.grad, then the
  // chain's output, the gradient and x go out of scope.
  r.on(EventKind::Pin, grad);
  r.on(EventKind::Release, seed);
  r.on(EventKind::Access, grad);
  r.on(EventKind::Release, act[n]);
  r.on(EventKind::Release, grad);
  r.on(EventKind::Release, act[0]);
  return r.take();
}

}  // namespace remat::sim
