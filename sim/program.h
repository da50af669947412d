// A recorded run as the offline simulator sees it: the tensors (cells) it names and the stream of
// events over them, read from a framework trace (docs/trace-format.md) or a log of the DTR
// research prototype (../shared/reference/dtr-log-format.md).  Tensor ids index `tensors`.
// Usage: for (const Program& p : read_programs("logs.zip")) { ... }
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dtr/config.h"

namespace remat::sim {

enum class EventKind : std::uint8_t {
  Constant,  // `tensor` appears with no producer (parameter, input); never evictable
  Call,      // op `op` reads `args`, produces `results`
  Mutate,    // in-place op `op` over `args`; args[i] for i in `mutated` become new tensors
             // `mutated_results` (same size); each old one loses a reference
  Release,   // a reference to `tensor` died
  Copy,      // a new name refers to `source` (== `tensor`): it gains a reference
  CopyFrom,  // a name moved from `tensor` (loses a reference) to `source` (gains one)
  Pin,       // `tensor` becomes unevictable (made resident first)
  Access,    // the program read `tensor` outside an op: it must be resident
  Annotate,  // `op` holds the annotation text (START, BACKWARD, ...)
  Write,     // (framework traces) the program wrote `tensor`'s bytes outside an op
};

struct Event {
  EventKind kind = EventKind::Annotate;
  std::string op;                      // Call / Mutate: op name; Annotate: the text
  std::vector<std::uint32_t> args;     // Call / Mutate: tensor ids read
  std::vector<std::uint32_t> results;  // Call: tensor ids produced (sizes in `tensors`)
  std::vector<std::int32_t> aliases;   // Call: per result, index into args it aliases, or -1
  std::vector<std::uint32_t> mutated;  // Mutate: indices into args
  std::vector<std::uint32_t> mutated_results;  // Mutate: the new tensor id of each mutated arg
  std::uint32_t tensor = 0;  // Constant, Release, Pin, Access, Write, Copy, CopyFrom
  std::uint32_t source = 0;  // Copy / CopyFrom: the tensor the name now refers to
  double time_ns = 0;        // measured or logged kernel time
  double seconds = 0;        // the same in seconds: a trace's exact SECONDS, else time_ns / 1e9
  double time_cost = 0;      // Call in a trace: what the runtime's time cost model scored
                             // (TIME_COST: its kernel-time estimate); 0: `seconds`
  double flops = 0;          // 0 where the input does not say
  double bytes = 0;          // bytes read and written; 0 where the input does not say
  std::size_t line = 0;      // 1-based line number in the input, for errors
  bool overwrite = false;    // Mutate in a framework trace: Pool::begin_write's path
};

struct TensorInfo {
  std::string name;       // as in the input: x7690
  std::size_t bytes = 0;  // as the input says; a Call result that aliases an argument adds none
};

// Where a program was read from.  A framework trace writes in place (MUTATE keeps the cell,
// which becomes a constant); the prototype's logs make each mutated argument a new tensor and
// need the tensors still referenced at the end to be resident.
enum class Origin : std::uint8_t { PrototypeLog, Trace };

struct Program {
  std::string source;  // file name (and zip member) it was read from
  Origin origin = Origin::PrototypeLog;
  std::vector<TensorInfo> tensors;
  std::vector<Event> events;
};

// The compute one Call or Mutate accounts under a cost model: recorded seconds, flops, bytes, or
// 1 (unit).
double event_cost(const Event& event, CostModel model);
// Sum of event_cost over every Call and Mutate: the compute of an unbudgeted run.
double total_cost(const Program& program, CostModel model);

}  // namespace remat::sim
