#include "dtr/trace.h"

#include <fmt/format.h>

#include "core/error.h"

namespace remat {
namespace {
std::string quoted_list(std::span<const std::string> names) {
  std::string s = "[";
  for (std::size_t i = 0; i < names.size(); ++i) s += fmt::format("{}\"{}\"", i ? "," : "", names[i]);
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
  line(R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"})");
}

Trace::~Trace() {
  if (file_) std::fclose(file_);
}

std::string Trace::name(const Cell& cell) { return fmt::format("x{}", cell.id()); }

void Trace::line(const std::string& s) {
  std::fputs(s.c_str(), file_);
  std::fputc('\n', file_);
}

void Trace::constant(const Cell& cell) {
  line(fmt::format(R"({{"INSTRUCTION":"CONSTANT","NAME":"{}"}})", name(cell)));
  line(fmt::format(R"({{"INSTRUCTION":"MEMORY","NAME":"{}","MEMORY":"{}"}})", name(cell), cell.nbytes()));
}

void Trace::call(const Record& r, std::span<const std::shared_ptr<Cell>> outputs) {
  std::vector<std::string> args, results;
  for (const auto& c : r.inputs) args.push_back(name(*c));
  for (const auto& c : outputs) results.push_back(name(*c));
  // TIME is in nanoseconds as in the prototype; FLOPS and BYTES feed the other cost models.
  line(fmt::format(R"({{"INSTRUCTION":"CALL","NAME":"{}","ARGS":{},"RESULT":{},"TIME":"{}","FLOPS":"{}","BYTES":"{}"}})",
                   escape(r.producer->name()), quoted_list(args), quoted_list(results),
                   static_cast<long long>(r.seconds * 1e9), r.flops, r.bytes));
  for (const auto& c : outputs) {
    line(fmt::format(R"({{"INSTRUCTION":"MEMORY","NAME":"{}","MEMORY":"{}"}})", name(*c), c->nbytes()));
    line(fmt::format(R"({{"INSTRUCTION":"ALIAS","NAME":"{}","ALIAS":"-1"}})", name(*c)));
  }
}

void Trace::mutate(const Record& r, const Cell& mutated) {
  std::vector<std::string> args;
  for (const auto& c : r.inputs) args.push_back(name(*c));
  // As in the prototype's logs: argument 0 is mutated; replay treats it as a new tensor of the
  // same size (the old value, still read by earlier records, lives on under a new cell).
  line(fmt::format(R"({{"INSTRUCTION":"MUTATE","NAME":"{}","ARGS":{},"MUTATE":["0"],"TIME":"{}"}})",
                   escape(r.producer->name()), quoted_list(args), static_cast<long long>(r.seconds * 1e9)));
  (void)mutated;
}

void Trace::release(const Cell& cell) {
  line(fmt::format(R"({{"INSTRUCTION":"RELEASE","NAME":"{}"}})", name(cell)));
}

void Trace::pin(const Cell& cell) {
  line(fmt::format(R"({{"INSTRUCTION":"PIN","NAME":"{}"}})", name(cell)));
}

void Trace::access(const Cell& cell) {
  line(fmt::format(R"({{"INSTRUCTION":"ACCESS","NAME":"{}"}})", name(cell)));
}

void Trace::annotate(std::string_view text) {
  line(fmt::format(R"({{"INSTRUCTION":"ANNOTATE","ANNOTATION":"{}"}})", escape(text)));
}

}  // namespace remat
