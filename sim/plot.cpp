#include "sim/plot.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "core/error.h"

namespace remat::sim {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("''") : std::string(1, c);  // gnuplot's single-quote escape
  return out + "'";
}

}  // namespace

void write_sweep_csv(const Sweep& sweep, const std::string& path) {
  std::ofstream out(path);
  REMAT_CHECK(out, "cannot open '{}' for writing", path);
  out << "budget_fraction";
  for (const auto& h : sweep.heuristics) out << ',' << h;
  out << '\n';
  for (std::size_t r = 0; r < sweep.fractions.size(); ++r) {
    out << fmt::format("{}", sweep.fractions[r]);
    for (const auto& v : sweep.overhead[r])
      out << ',' << (v ? fmt::format("{:.6g}", *v) : std::string());
    out << '\n';
  }
  REMAT_CHECK(out.good(), "error writing '{}'", path);
}

std::string sweep_plot_script(const Sweep& sweep, const std::string& csv_path,
                              const std::string& png_path) {
  std::string s;
  s += "set terminal pngcairo size 800,520 enhanced font 'sans,11'\n";
  s += "set output " + quoted(png_path) + "\n";
  s += "set datafile separator ','\n";
  s += "set datafile missing ''\n";
  s += "set title " + quoted(sweep.title) + " noenhanced\n";
  s += "set xlabel 'budget (fraction of the unbudgeted peak)'\n";
  s += "set ylabel 'overhead (total compute / unbudgeted compute)'\n";
  s += fmt::format("set xrange [0:1.02]\nset yrange [0.95:{}]\n", sweep.thrash_limit + 0.05);
  s += "set key top right\nset grid\n";
  s += "plot ";
  for (std::size_t c = 0; c < sweep.heuristics.size(); ++c) {
    if (c) s += ", \\\n     ";
    s += fmt::format("{} using 1:{} with linespoints lw 2 pt 7 ps 0.6 title {} noenhanced",
                     quoted(csv_path), c + 2, quoted(sweep.heuristics[c]));
  }
  return s + "\n";
}

bool plot_sweep(const Sweep& sweep, const std::string& csv_path, const std::string& png_path,
                std::string* error) {
  std::FILE* pipe = popen("gnuplot 2>&1", "w");
  if (!pipe) {
    if (error) *error = "cannot start gnuplot";
    return false;
  }
  const std::string script = sweep_plot_script(sweep, csv_path, png_path);
  std::fwrite(script.data(), 1, script.size(), pipe);
  const int status = pclose(pipe);
  if (status != 0) {
    if (error)
      *error = fmt::format("gnuplot exited with status {} (is gnuplot-nox installed?)", status);
    return false;
  }
  return true;
}

}  // namespace remat::sim
