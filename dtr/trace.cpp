#include "dtr/trace.h"

#include <fmt/format.h>

#include "core/error.h"

namespace remat {
namespace {
std::string quoted_list(std::span<const std::string> names) {
  std::string s = "[";
  for (std::size_t i = 0; i < names.size(); ++i)
    s += fmt::format("{}\"{}\"", i ? "," : "", names[i]);
  return s + "]";
}
std::string escape(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out;
}
}  // namespace

Trace::Trace(const std::string& path) : file_(std::fopen(path.c_str(), "w")) {
  REMAT_CHECK(file_, "trace: cannot open '{}' for writing", path);
  // SOURCE tells the simulator that MUTATE lines follow this framework's in-place semantics.
  line(R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START","SOURCE":"remat"})");
}

Trace::~Trace() {
  if (file_) std::fclose(file_);
}

std::string Trace::name(const Cell& cell) {
  return fmt::format("x{}", cell.id());
}

void Trace::line(const std::string& s) {
  std::fputs(s.c_str(), file_);
  std::fputc('\n', file_);
}

std::string Trace::known(const Cell& cell) {
  if (!live_.contains(cell.id())) constant(cell);
  return name(cell);
}

void Trace::constant(const Cell& cell) {
  live_.insert(cell.id());
  line(fmt::format(R"({{"INSTRUCTION":"CONSTANT","NAME":"{}"}})", name(cell)));
  line(fmt::format(R"({{"INSTRUCTION":"MEMORY","NAME":"{}","MEMORY":"{}"}})", name(cell),
                   cell.nbytes()));
}

void Trace::call(const Record& r, std::span<const std::shared_ptr<Cell>> outputs) {
  std::vector<std::string> args, results;
  for (const auto& c : r.inputs) args.push_back(known(*c));
  for (const auto& c : outputs) {
    live_.insert(c->id());
    results.push_back(name(*c));
  }
  // TIME is in whole nanoseconds as in the prototype; SECONDS is the exact measured value (the
  // shortest text that reads back to the same double), so a replay accounts the same compute.
  // TIME_COST is what the time cost model scores (Record::cost); FLOPS and BYTES feed the
  // other cost models.
  line(fmt::format(
      R"({{"INSTRUCTION":"CALL","NAME":"{}","ARGS":{},"RESULT":{},"TIME":"{}","SECONDS":"{}","TIME_COST":"{}","FLOPS":"{}","BYTES":"{}"}})",
      escape(r.producer->name()), quoted_list(args), quoted_list(results),
      static_cast<long long>(r.seconds * 1e9), r.seconds, r.cost(CostModel::Time), r.flops,
      r.bytes));
  for (const auto& c : outputs) {
    line(fmt::format(R"({{"INSTRUCTION":"MEMORY","NAME":"{}","MEMORY":"{}"}})", name(*c),
                     c->nbytes()));
    line(fmt::format(R"({{"INSTRUCTION":"ALIAS","NAME":"{}","ALIAS":"-1"}})", name(*c)));
  }
}

void Trace::mutate(const Record& r, const Cell& mutated) {
  std::vector<std::string> args;
  for (const auto& c : r.inputs) args.push_back(known(*c));
  // As in the prototype's logs: argument 0 is mutated.  The cell keeps its name and becomes a
  // constant; the old value, still read by earlier records, lives on under a new cell.
  // OVERWRITE is the path Pool::begin_write took, which a replay must take too.
  line(fmt::format(
      R"({{"INSTRUCTION":"MUTATE","NAME":"{}","ARGS":{},"MUTATE":["0"],"TIME":"{}","SECONDS":"{}","OVERWRITE":"{}"}})",
      escape(r.producer->name()), quoted_list(args), static_cast<long long>(r.seconds * 1e9),
      r.seconds, overwrite_ ? 1 : 0));
  (void)mutated;
}

void Trace::write(const Cell& cell) {
  line(fmt::format(R"({{"INSTRUCTION":"WRITE","NAME":"{}"}})", known(cell)));
}

void Trace::release(const Cell& cell) {
  // A cell from before tracing that the trace never named needs no line.
  if (live_.erase(cell.id()) == 0) return;
  line(fmt::format(R"({{"INSTRUCTION":"RELEASE","NAME":"{}"}})", name(cell)));
}

void Trace::pin(const Cell& cell) {
  line(fmt::format(R"({{"INSTRUCTION":"PIN","NAME":"{}"}})", known(cell)));
}

void Trace::access(const Cell& cell) {
  line(fmt::format(R"({{"INSTRUCTION":"ACCESS","NAME":"{}"}})", known(cell)));
}

void Trace::annotate(std::string_view text) {
  line(fmt::format(R"({{"INSTRUCTION":"ANNOTATE","ANNOTATION":"{}"}})", escape(text)));
}

}  // namespace remat
