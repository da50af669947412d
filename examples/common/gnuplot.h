// Runs a gnuplot program (for the examples' PNG figures).
// Usage: std::string error; if (!run_gnuplot(script, &error)) report(error);
#pragma once
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace remat::examples {

// Whether a gnuplot program is on the PATH.
inline bool gnuplot_available() {
  return std::system("command -v gnuplot > /dev/null 2>&1") == 0;
}

// Pipes the script to gnuplot; false (with the reason) when gnuplot is missing or fails.
inline bool run_gnuplot(const std::string& script, std::string* error) {
  std::FILE* pipe = popen("gnuplot 2>&1", "w");
  if (!pipe) {
    if (error) *error = "cannot start gnuplot";
    return false;
  }
  std::fwrite(script.data(), 1, script.size(), pipe);
  const int status = pclose(pipe);
  if (status != 0) {
    if (error)
      *error = fmt::format("gnuplot exited with status {} (is gnuplot-nox installed?)", status);
    return false;
  }
  return true;
}

// A string as a gnuplot single-quoted literal.
inline std::string gnuplot_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace remat::examples
