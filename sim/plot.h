// Sweep output: the CSV of overhead against budget fraction (one column per heuristic) and the
// gnuplot program that draws it as a PNG, like the DTR paper's simulated figure.
// Usage: write_sweep_csv(path, sweep); plot_sweep(sweep, path, "sweep.png", &error);
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace remat::sim {

struct Sweep {
  std::string title;
  std::vector<std::string> heuristics;  // column order
  std::vector<double> fractions;        // row order
  // overhead[row][column]; empty where the run thrashed or did not fit.
  std::vector<std::vector<std::optional<double>>> overhead;
  double thrash_limit = 2;
};

void write_sweep_csv(const Sweep& sweep, const std::string& path);
// The gnuplot program (pngcairo terminal) for a CSV written by write_sweep_csv.
std::string sweep_plot_script(const Sweep& sweep, const std::string& csv_path,
                              const std::string& png_path);
// Pipes the script to gnuplot; false (with the reason) when gnuplot is missing or fails.
bool plot_sweep(const Sweep& sweep, const std::string& csv_path, const std::string& png_path,
                std::string* error);

}  // namespace remat::sim
