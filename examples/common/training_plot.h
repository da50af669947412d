// The picture of a training run under a budget (train_resnet --plot): the pool's resident bytes
// after every op call of one step, against the budget and the same program's unbudgeted step,
// with the calls that evicted or rematerialized marked; below, the training loss and the test
// accuracy over the run.  The numbers go to PATH.dat, the PNG to PATH, drawn by gnuplot.
// Usage: TrainingPlot plot; plot.path = "run.png"; plot.check_path();  // before training
//        ... plot.step = {n, pool.stop_timeline()}; plot.losses.push_back(loss); ...
//        std::string why; if (!plot.draw(&why)) report(why);
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "dtr/timeline.h"
#include "examples/common/gnuplot.h"
#include "nn/serialize.h"

namespace remat::examples {

// The timeline of one training step (Pool::start_timeline / stop_timeline around it).
struct StepTimeline {
  long step = 0;
  std::vector<TimelineSample> samples;
};

struct TrainingPlot {
  std::string path;   // the PNG
  std::string title;  // above both panels
  std::optional<std::size_t> budget;
  std::optional<StepTimeline> reference;  // a step without a budget, for comparison
  std::optional<StepTimeline> step;       // the step drawn (under the budget when there is one)
  bool step_budgeted = false;
  std::vector<double> losses;                         // the training loss of steps 1, 2, ...
  std::vector<std::pair<long, double>> test_curve;    // (step, accuracy on the curve's images)
  long test_curve_images = 0;                         // how many test images each point saw
  std::optional<std::pair<long, double>> final_test;  // (images, accuracy) of the whole test set
  static constexpr int kLossMeanSteps = 20;           // the smoothed loss's window

  std::string data_path() const { return path + ".dat"; }

  // Refuses, before any training, a path that cannot be written (nor its data file).
  void check_path() const {
    for (const auto& p : {path, data_path()}) {
      try {
        nn::check_save_path(p);
      } catch (const std::exception& e) {
        throw Error(fmt::format("--plot: {}", e.what()));
      }
    }
  }

  // Writes the data file, then the PNG; false with the reason when gnuplot is missing or fails
  // (the data file is written either way).
  bool draw(std::string* why) const {
    write_data();
    if (!gnuplot_available()) {
      *why = fmt::format(
          "gnuplot is not installed (apt-get install gnuplot-nox); the numbers are in {}",
          data_path());
      return false;
    }
    return run_gnuplot(script(), why);
  }

 private:
  // The data file's block names.
  static constexpr const char* kReference = "[reference-step]";
  static constexpr const char* kStep = "[drawn-step]";
  static constexpr const char* kLoss = "[loss]";
  static constexpr const char* kCurve = "[test-curve]";
  static constexpr const char* kFinal = "[test-final]";
  static double mib(std::size_t bytes) { return static_cast<double>(bytes) / 1048576.0; }
  static std::size_t peak_of(const StepTimeline& t) {
    std::size_t peak = 0;
    for (const auto& s : t.samples) peak = std::max(peak, s.resident_bytes);
    return peak;
  }
  static std::uint64_t most_per_call(const StepTimeline& t) {
    std::uint64_t most = 0, ev = 0, re = 0;
    for (const auto& s : t.samples) {
      most = std::max({most, s.evictions - ev, s.rematerializations - re});
      ev = s.evictions, re = s.rematerializations;
    }
    return most;
  }

  // Five blocks, each opened by a comment naming it for gnuplot's `index '[name]'` (an empty
  // block, a comment alone, would shift numbered indices): the reference timeline, the drawn
  // step's timeline, the loss, the test curve, the final test accuracy.
  void write_data() const {
    std::ofstream out(data_path());
    if (!out) throw Error(fmt::format("--plot: cannot write '{}'", data_path()));
    auto timeline = [&](const std::optional<StepTimeline>& t, const char* name, const char* what) {
      out << fmt::format(
          "# {} {} step {}: call, resident MiB, resident + cached MiB, evictions in the call, "
          "rematerializations in the call, both since the step began, op\n",
          name, what, t ? t->step : 0);
      if (!t) return;
      std::uint64_t ev = 0, re = 0;
      for (const auto& s : t->samples) {
        out << fmt::format("{} {:.4f} {:.4f} {} {} {} {} {}\n", s.call, mib(s.resident_bytes),
                           mib(s.resident_bytes + s.cached_bytes), s.evictions - ev,
                           s.rematerializations - re, s.evictions, s.rematerializations,
                           s.op.empty() ? "?" : s.op);
        ev = s.evictions, re = s.rematerializations;
      }
    };
    timeline(reference, kReference, "unbudgeted");
    out << "\n\n";
    timeline(step, kStep, step_budgeted ? "budgeted" : "unbudgeted");
    out << "\n\n# " << kLoss << " step, training loss, mean of the last " << kLossMeanSteps
        << " steps\n";
    double window = 0;
    for (std::size_t i = 0; i < losses.size(); ++i) {
      window += losses[i];
      if (i >= static_cast<std::size_t>(kLossMeanSteps)) window -= losses[i - kLossMeanSteps];
      const auto n = std::min<std::size_t>(i + 1, kLossMeanSteps);
      out << fmt::format("{} {:.6g} {:.6g}\n", i + 1, losses[i], window / static_cast<double>(n));
    }
    out << "\n\n# " << kCurve << " step, test accuracy on the first " << test_curve_images
        << " test images\n";
    for (const auto& [s, acc] : test_curve) out << fmt::format("{} {:.6g}\n", s, acc);
    out << "\n\n# " << kFinal << " step, test accuracy on the whole test set\n";
    if (final_test) out << fmt::format("{} {:.6g}\n", losses.size(), final_test->second);
    if (!out.flush()) throw Error(fmt::format("--plot: cannot write '{}'", data_path()));
  }

  std::string script() const {
    // A block of the data file, by name.
    auto block = [&](const char* name) {
      return gnuplot_quoted(data_path()) + " index " + gnuplot_quoted(name);
    };
    std::string s = fmt::format(
        "set terminal pngcairo size 1100,900 font ',10'\nset output {}\n"
        "set multiplot layout 2,1 title {}\n"
        "set grid lc rgb '#dddddd'\nset key top right box opaque samplen 2\n",
        gnuplot_quoted(path), gnuplot_quoted(title));

    // Panel 1: memory after every op call of one step.
    std::vector<std::string> curves;
    if (reference)
      curves.push_back(
          fmt::format("{} using 1:2 with lines lw 1.5 lc rgb '#999999' title {}", block(kReference),
                      gnuplot_quoted(fmt::format("step {} without a budget (peak {:.1f} MiB)",
                                                 reference->step, mib(peak_of(*reference))))));
    std::uint64_t most = 0;
    if (step) {
      const std::uint64_t evictions = step->samples.empty() ? 0 : step->samples.back().evictions;
      const std::uint64_t remats =
          step->samples.empty() ? 0 : step->samples.back().rematerializations;
      most = most_per_call(*step);
      curves.push_back(
          fmt::format("{} using 1:2 with lines lw 2 lc rgb '#1f5fbf' title {}", block(kStep),
                      gnuplot_quoted(fmt::format("step {}{} (peak {:.1f} MiB)", step->step,
                                                 step_budgeted ? " under the budget" : "",
                                                 mib(peak_of(*step))))));
      if (step_budgeted)
        curves.push_back(
            fmt::format("{} using 1:3 with lines lw 1 dt 3 lc rgb '#1f5fbf' title {}", block(kStep),
                        gnuplot_quoted("the same plus the allocator's cached free blocks")));
      if (most > 0) {
        curves.push_back(fmt::format(
            "{} using 1:($4 > 0 ? $4 : 1/0) axes x1y2 with impulses lw 1 lc rgb '#d62728' "
            "title {}",
            block(kStep),
            gnuplot_quoted(fmt::format("evictions in the call ({} in the step)", evictions))));
        curves.push_back(
            fmt::format("{} using 1:($5 > 0 ? $5 : 1/0) axes x1y2 with points pt 7 ps 0.35 "
                        "lc rgb '#2ca02c' title {}",
                        block(kStep),
                        gnuplot_quoted(fmt::format(
                            "rematerializations in the call ({} in the step)", remats))));
      }
    }
    if (budget)
      curves.push_back(fmt::format("{:.4f} with lines lw 1.5 dt 2 lc rgb '#d62728' title {}",
                                   mib(*budget),
                                   gnuplot_quoted(fmt::format("budget {:.1f} MiB", mib(*budget)))));
    // Headroom above the highest line keeps the key off the curves.
    std::size_t top = budget.value_or(0);
    if (reference) top = std::max(top, peak_of(*reference));
    if (step) top = std::max(top, peak_of(*step));
    s += fmt::format(
        "set title 'Memory over one training step: resident bytes after every op call'\n"
        "set xlabel 'op call within the step'\nset ylabel 'MiB'\nset yrange [0:{:.4f}]\n",
        top > 0 ? 1.45 * mib(top) : 1.0);
    if (most > 0)
      // The counts take the lowest quarter of the panel, under the curves.
      s += fmt::format(
          "set y2label 'evictions, rematerializations per call'\nset y2range [0:{}]\n"
          "set y2tics nomirror\nset ytics nomirror\n",
          4 * most);
    s += curves.empty() ? "set label 1 'no step was recorded' at graph 0.4, graph 0.5\n"
                          "plot 0 notitle\n"
                        : "plot " + join(curves) + "\n";

    // Panel 2: the loss and the test accuracy over the run.
    s += "unset label 1\nunset y2label\nunset y2tics\nset ytics mirror\n"
         "set title 'Training loss and test accuracy'\nset xlabel 'step'\n"
         "set ylabel 'cross-entropy loss'\nset yrange [0:*]\n"
         "set y2label 'test accuracy'\nset y2range [0:1]\nset y2tics 0.1 nomirror\n"
         "set ytics nomirror\nset key center right\n";
    std::vector<std::string> lines;
    if (!losses.empty()) {
      lines.push_back(fmt::format(
          "{} using 1:2 with lines lw 1 lc rgb '#9dbbe6' title 'loss of each step'", block(kLoss)));
      lines.push_back(
          fmt::format("{} using 1:3 with lines lw 2 lc rgb '#1f5fbf' title {}", block(kLoss),
                      gnuplot_quoted(fmt::format("mean of the last {} steps", kLossMeanSteps))));
    }
    if (!test_curve.empty())
      lines.push_back(fmt::format(
          "{} using 1:2 axes x1y2 with linespoints pt 7 lw 1.5 lc rgb '#ff7f0e' title {}",
          block(kCurve),
          gnuplot_quoted(fmt::format("test accuracy, first {} images", test_curve_images))));
    if (final_test)
      lines.push_back(fmt::format(
          "{} using 1:2 axes x1y2 with points pt 5 ps 1.5 lc rgb '#d62728' title {}", block(kFinal),
          gnuplot_quoted(fmt::format("test accuracy, all {} images: {:.4f}", final_test->first,
                                     final_test->second))));
    s += lines.empty() ? "plot 0 notitle\n" : "plot " + join(lines) + "\n";
    return s + "unset multiplot\n";
  }

  static std::string join(const std::vector<std::string>& parts) {
    std::string s;
    for (const auto& p : parts) s += (s.empty() ? "" : ", \\\n  ") + p;
    return s;
  }
};

}  // namespace remat::examples
