// The optional trace of a run: one JSON object per line, with the instruction names and fields
// of the DTR research prototype's logs where they fit (CONSTANT, MEMORY, CALL, ALIAS, MUTATE,
// RELEASE, PIN, ANNOTATE) plus our ACCESS and WRITE, so the offline simulator replays both and
// reproduces the run's pool calls exactly.  docs/trace-format.md documents every line.
// Usage: pool.start_trace("run.jsonl"); ... pool.stop_trace();
#pragma once
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>

#include "dtr/cell.h"

namespace remat {

class Trace {
 public:
  explicit Trace(const std::string& path);
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  void constant(const Cell& cell);
  void call(const Record& record, std::span<const std::shared_ptr<Cell>> outputs);
  // An in-place write starts (Pool::begin_write); its MUTATE line says which path it took.
  void begin_write(bool overwrite) { overwrite_ = overwrite; }
  void mutate(const Record& record, const Cell& mutated);
  // Bytes written outside an op (Cell::mark_mutated).
  void write(const Cell& cell);
  void release(const Cell& cell);
  void pin(const Cell& cell);
  void access(const Cell& cell);
  void annotate(std::string_view text);
  // Pool::end_step: the simulator ends a step of dtr-next's there, as the runtime did.
  void step_end() { annotate(kStepEnd); }
  static constexpr std::string_view kStepEnd = "STEP_END";
  static std::string name(const Cell& cell);

 private:
  void line(const std::string& s);
  // The cell's name; a cell the trace has not introduced (made before tracing started) is
  // introduced first as a CONSTANT, so every trace reads on its own.
  std::string known(const Cell& cell);
  std::FILE* file_;
  bool overwrite_ = false;
  std::unordered_set<std::uint64_t> live_;  // cells introduced and not yet released
};

}  // namespace remat
