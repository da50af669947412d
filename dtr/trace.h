// The optional trace of a run: one JSON object per line, with the instruction names and fields
// of the DTR research prototype's logs where they fit (CONSTANT, MEMORY, CALL, ALIAS, MUTATE,
// RELEASE, PIN, ANNOTATE), so the offline simulator replays both.  docs/trace-format.md
// documents every line.  Usage: pool.start_trace("run.jsonl"); ... pool.stop_trace();
#pragma once
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

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
  void mutate(const Record& record, const Cell& mutated);
  void release(const Cell& cell);
  void pin(const Cell& cell);
  void access(const Cell& cell);
  void annotate(std::string_view text);
  static std::string name(const Cell& cell);

 private:
  void line(const std::string& s);
  std::FILE* file_;
};

}  // namespace remat
