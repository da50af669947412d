// The line parser behind read.h: both input kinds share one instruction vocabulary, so one
// pass builds the tensors, resolves names (COPY and MUTATE rebind them) and counts references,
// which lets it reject a name used after its last release instead of failing mid-replay.
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"
#include "sim/read.h"

namespace remat::sim {
namespace {

using nlohmann::json;

// No machine holds a tensor of 2^50 bytes (1 PiB), nor programs whose tensors total 2^60 bytes;
// larger sizes in a file are corrupt, and bounding them keeps the pool's byte sums exact.
constexpr double kMaxTensorBytes = 1125899906842624.0;      // 2^50
constexpr double kMaxProgramBytes = 1152921504606846976.0;  // 2^60

struct Line {
  std::string_view text;
  std::size_t number = 0;
};

std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> lines;
  std::size_t number = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    ++number;
    std::string_view l = text.substr(pos, end - pos);
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ' || l.back() == '\t'))
      l.remove_suffix(1);
    while (!l.empty() && (l.front() == ' ' || l.front() == '\t')) l.remove_prefix(1);
    if (!l.empty()) lines.push_back({l, number});
    pos = end + 1;
  }
  return lines;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : lines_(split_lines(text)) {
    program_.source = source;
  }

  Program run() {
    std::size_t i = find_start();
    while (i < lines_.size()) i = event(i);
    return std::move(program_);
  }

 private:
  template <class... Args>
  [[noreturn]] void fail(std::size_t line, fmt::format_string<Args...> f, Args&&... args) const {
    REMAT_THROW("{}:{}: {}", program_.source, line, fmt::format(f, std::forward<Args>(args)...));
  }

  json object(std::size_t i) const {
    json j;
    try {
      j = json::parse(lines_[i].text);
    } catch (const json::exception& e) {
      fail(lines_[i].number, "not valid JSON ({})", e.what());
    }
    if (!j.is_object()) fail(lines_[i].number, "expected a JSON object, got {}", lines_[i].text);
    instruction(j, i);
    return j;
  }

  std::string instruction(const json& j, std::size_t i) const {
    return string(j, "INSTRUCTION", i, "line");
  }

  std::string string(const json& j, const char* key, std::size_t i, std::string_view what) const {
    auto it = j.find(key);
    if (it == j.end()) fail(lines_[i].number, "{} has no field {}", what, key);
    if (!it->is_string())
      fail(lines_[i].number, "{}: field {} must be a string, got {}", what, key, it->dump());
    return it->get<std::string>();
  }

  std::vector<std::string> strings(const json& j, const char* key, std::size_t i,
                                   std::string_view what) const {
    auto it = j.find(key);
    if (it == j.end()) fail(lines_[i].number, "{} has no field {}", what, key);
    if (!it->is_array())
      fail(lines_[i].number, "{}: field {} must be an array, got {}", what, key, it->dump());
    std::vector<std::string> out;
    for (const auto& v : *it) {
      if (!v.is_string())
        fail(lines_[i].number, "{}: field {} must hold strings, got {}", what, key, v.dump());
      out.push_back(v.get<std::string>());
    }
    return out;
  }

  // A number written as a decimal string (as the logs do) or as a JSON number.
  double number(const json& v, const char* key, std::size_t i, std::string_view what) const {
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      double d = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
      if (ec == std::errc() && end == s.data() + s.size() && std::isfinite(d)) return d;
    }
    fail(lines_[i].number, "{}: field {} must be a number, got {}", what, key, v.dump());
  }
  double number(const json& j, const char* key, std::size_t i, std::string_view what,
                bool required) const {
    auto it = j.find(key);
    if (it == j.end()) {
      if (required) fail(lines_[i].number, "{} has no field {}", what, key);
      return 0;
    }
    return number(*it, key, i, what);
  }
  // A whole number in [lo, hi]: the only doubles that may be cast to an integer type.
  double whole(const json& v, const char* key, std::size_t i, std::string_view what, double lo,
               double hi) const {
    const double d = number(v, key, i, what);
    if (d != std::floor(d) || d < lo || d > hi)
      fail(lines_[i].number, "{}: field {} must be a whole number from {} to {}, got {}", what, key,
           lo, hi, v.dump());
    return d;
  }
  std::size_t byte_count(const json& j, const char* key, std::size_t i,
                         std::string_view what) const {
    auto it = j.find(key);
    if (it == j.end()) fail(lines_[i].number, "{} has no field {}", what, key);
    return static_cast<std::size_t>(whole(*it, key, i, what, 0, kMaxTensorBytes));
  }
  // A string field when present and a string, else `fallback`; for lines that need not carry it.
  static std::string string_or(const json& j, const char* key, const std::string& fallback) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
  }

  std::size_t find_start() {
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      const json j = object(i);
      if (instruction(j, i) == "ANNOTATE" && string(j, "ANNOTATION", i, "ANNOTATE") == "START") {
        if (j.contains("SOURCE") && string(j, "SOURCE", i, "ANNOTATE") == "remat")
          program_.origin = Origin::Trace;
        return i + 1;
      }
    }
    return 0;
  }

  // ---- names and references

  std::uint32_t define(const std::string& name, std::size_t bytes, std::size_t i) {
    if (auto it = names_.find(name); it != names_.end() && refs_[it->second] > 0)
      fail(lines_[i].number, "tensor {} is defined again while still referenced", name);
    total_bytes_ += static_cast<double>(bytes);
    if (total_bytes_ > kMaxProgramBytes)
      fail(lines_[i].number,
           "tensor {}: the program's tensors total more than 2^60 bytes (corrupt sizes)", name);
    const auto id = static_cast<std::uint32_t>(program_.tensors.size());
    program_.tensors.push_back({name, bytes});
    storage_.push_back(id);
    refs_.push_back(1);
    names_[name] = id;
    return id;
  }

  std::uint32_t live(const std::string& name, std::size_t i, std::string_view what) const {
    auto it = names_.find(name);
    if (it == names_.end()) fail(lines_[i].number, "{}: unknown tensor {}", what, name);
    if (refs_[it->second] <= 0)
      fail(lines_[i].number, "{}: tensor {} is used after its last release", what, name);
    return it->second;
  }

  // ---- one event; returns the index of the next line to read

  std::size_t event(std::size_t i) {
    const json j = object(i);
    const std::string ins = instruction(j, i);
    Event e;
    e.line = lines_[i].number;
    std::size_t next = i + 1;
    if (ins == "CONSTANT") {
      const std::string name = string(j, "NAME", i, "CONSTANT");
      const std::size_t bytes = memory_line(next, name, "CONSTANT");
      ++next;
      e.kind = EventKind::Constant;
      e.tensor = define(name, bytes, i);
    } else if (ins == "CALL") {
      e.kind = EventKind::Call;
      e.op = string(j, "NAME", i, "CALL");
      for (const auto& a : strings(j, "ARGS", i, "CALL"))
        e.args.push_back(live(a, i, "CALL " + e.op));
      costs(j, i, e, "CALL");
      for (const auto& r : strings(j, "RESULT", i, "CALL")) {
        const std::size_t bytes = memory_line(next++, r, "CALL result");
        const std::int32_t alias = alias_line(next++, r, e.args.size());
        const std::uint32_t t = define(r, bytes, i);
        if (alias >= 0) storage_[t] = storage_[e.args[alias]];
        e.results.push_back(t);
        e.aliases.push_back(alias);
      }
    } else if (ins == "MUTATE") {
      e.kind = EventKind::Mutate;
      e.op = string(j, "NAME", i, "MUTATE");
      const auto names = strings(j, "ARGS", i, "MUTATE");
      for (const auto& a : names) e.args.push_back(live(a, i, "MUTATE " + e.op));
      costs(j, i, e, "MUTATE");
      auto m = j.find("MUTATE");
      if (m == j.end() || !m->is_array()) fail(e.line, "MUTATE has no array field MUTATE");
      for (const auto& v : *m) {
        if (e.args.empty()) fail(e.line, "MUTATE has an index but no arguments");
        const auto k = static_cast<std::size_t>(
            whole(v, "MUTATE", i, "MUTATE", 0, static_cast<double>(e.args.size() - 1)));
        e.mutated.push_back(static_cast<std::uint32_t>(k));
      }
      if (program_.origin == Origin::Trace) {
        if (e.mutated.size() != 1 || e.mutated[0] != 0)
          fail(e.line, "a trace's MUTATE writes argument 0 only");
        e.overwrite = number(j, "OVERWRITE", i, "MUTATE", true) != 0;
      }
      for (std::uint32_t k : e.mutated) {
        const std::uint32_t old = e.args[k];
        if (refs_[old] <= 0) fail(e.line, "MUTATE mutates {} twice", names[k]);
        const std::size_t bytes = program_.tensors[storage_[old]].bytes;
        const long old_refs = refs_[old];
        refs_[old] = 0;  // lets the name be defined again
        const std::uint32_t t = define(names[k], bytes, i);
        // In a trace the cell, and every reference to it, stays; a log's old tensor loses one.
        if (program_.origin == Origin::Trace)
          refs_[t] = old_refs;
        else
          refs_[old] = old_refs - 1;
        e.mutated_results.push_back(t);
      }
    } else if (ins == "RELEASE") {
      e.kind = EventKind::Release;
      e.tensor = live(string(j, "NAME", i, "RELEASE"), i, "RELEASE");
      --refs_[e.tensor];
    } else if (ins == "COPY") {
      e.kind = EventKind::Copy;
      const std::string dst = string(j, "DST", i, "COPY");
      e.source = e.tensor = live(string(j, "SRC", i, "COPY"), i, "COPY");
      if (auto it = names_.find(dst);
          it != names_.end() && refs_[it->second] > 0 && it->second != e.source)
        fail(e.line, "COPY: destination {} already names a live tensor (use COPY_FROM)", dst);
      names_[dst] = e.source;
      ++refs_[e.source];
    } else if (ins == "COPY_FROM") {
      e.kind = EventKind::CopyFrom;
      const std::string dst = string(j, "DST", i, "COPY_FROM");
      e.tensor = live(dst, i, "COPY_FROM");
      e.source = live(string(j, "SRC", i, "COPY_FROM"), i, "COPY_FROM");
      --refs_[e.tensor];
      ++refs_[e.source];
      names_[dst] = e.source;
    } else if (ins == "PIN" || ins == "ACCESS" || ins == "WRITE") {
      e.kind = ins == "PIN"      ? EventKind::Pin
               : ins == "ACCESS" ? EventKind::Access
                                 : EventKind::Write;
      e.tensor = live(string(j, "NAME", i, ins), i, ins);
    } else if (ins == "ANNOTATE") {
      e.kind = EventKind::Annotate;
      e.op = string(j, "ANNOTATION", i, "ANNOTATE");
    } else if (ins == "MEMORY" || ins == "ALIAS") {
      fail(e.line, "{} line for {} does not follow the CONSTANT or CALL that makes the tensor", ins,
           string_or(j, "NAME", "?"));
    } else {
      fail(e.line,
           "unknown INSTRUCTION '{}' (expected CONSTANT, MEMORY, CALL, ALIAS, MUTATE, RELEASE, "
           "COPY, COPY_FROM, PIN, ACCESS, WRITE or ANNOTATE)",
           ins);
    }
    program_.events.push_back(std::move(e));
    return next;
  }

  void costs(const json& j, std::size_t i, Event& e, std::string_view what) const {
    e.time_ns = number(j, "TIME", i, what, true);
    e.seconds = j.contains("SECONDS") ? number(j, "SECONDS", i, what, true) : e.time_ns / 1e9;
    e.flops = number(j, "FLOPS", i, what, false);
    e.bytes = number(j, "BYTES", i, what, false);
    e.time_cost = number(j, "TIME_COST", i, what, false);
    if (e.time_ns < 0 || e.seconds < 0 || e.time_cost < 0 || e.flops < 0 || e.bytes < 0)
      fail(e.line, "{}: negative cost", what);
  }

  // The MEMORY line that must follow a CONSTANT or a CALL's result `name`.
  std::size_t memory_line(std::size_t k, const std::string& name, std::string_view what) const {
    const std::size_t at = k < lines_.size() ? k : lines_.size() - 1;
    if (k >= lines_.size())
      fail(lines_[at].number, "{} {} is not followed by its MEMORY line", what, name);
    const json m = object(k);
    if (instruction(m, k) != "MEMORY" || string(m, "NAME", k, "MEMORY") != name)
      fail(lines_[k].number, "expected the MEMORY line of {} {}, got {}", what, name,
           lines_[k].text);
    return byte_count(m, "MEMORY", k, "MEMORY");
  }

  // The ALIAS line after a CALL result's MEMORY: -1, or the argument it aliases.
  std::int32_t alias_line(std::size_t k, const std::string& name, std::size_t n_args) const {
    if (k >= lines_.size())
      fail(lines_.back().number, "CALL result {} is not followed by its ALIAS line", name);
    const json a = object(k);
    if (instruction(a, k) != "ALIAS" || string(a, "NAME", k, "ALIAS") != name)
      fail(lines_[k].number, "expected the ALIAS line of CALL result {}, got {}", name,
           lines_[k].text);
    auto it = a.find("ALIAS");
    if (it == a.end()) fail(lines_[k].number, "ALIAS has no field ALIAS");
    const double v = number(*it, "ALIAS", k, "ALIAS");
    if (v != std::floor(v) || v < -1 || v >= static_cast<double>(n_args))
      fail(lines_[k].number, "ALIAS {} of {} is neither -1 nor an argument index below {}", v, name,
           n_args);
    return static_cast<std::int32_t>(v);
  }

  std::vector<Line> lines_;
  Program program_;
  std::unordered_map<std::string, std::uint32_t> names_;
  std::vector<long> refs_;
  std::vector<std::uint32_t> storage_;  // per tensor: the tensor owning its storage (aliases)
  double total_bytes_ = 0;              // of every tensor defined so far
};

}  // namespace

Program parse_program(std::string_view text, const std::string& source) {
  return Parser(text, source).run();
}

}  // namespace remat::sim
