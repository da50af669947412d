#include "support/sim_log.h"

#include <fmt/format.h>

namespace remat::testing {

std::string log_start() {
  return R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"})"
         "\n";
}

std::string log_constant(const std::string& name, std::size_t bytes) {
  return fmt::format(R"({{"INSTRUCTION":"CONSTANT","NAME":"{0}"}})"
                     "\n"
                     R"({{"INSTRUCTION":"MEMORY","NAME":"{0}","MEMORY":"{1}"}})"
                     "\n",
                     name, bytes);
}

std::string log_call(const std::string& op, const std::string& out,
                     const std::vector<std::string>& args, std::size_t bytes, long long time_ns) {
  std::string list;
  for (const auto& a : args) list += (list.empty() ? "\"" : ",\"") + a + "\"";
  return fmt::format(
      R"({{"INSTRUCTION":"CALL","NAME":"{0}","ARGS":[{2}],"RESULT":["{1}"],"TIME":"{4}"}})"
      "\n"
      R"({{"INSTRUCTION":"MEMORY","NAME":"{1}","MEMORY":"{3}"}})"
      "\n"
      R"({{"INSTRUCTION":"ALIAS","NAME":"{1}","ALIAS":"-1"}})"
      "\n",
      op, out, list, bytes, time_ns);
}

std::string log_release(const std::string& name) {
  return fmt::format(R"({{"INSTRUCTION":"RELEASE","NAME":"{}"}})"
                     "\n",
                     name);
}

}  // namespace remat::testing
