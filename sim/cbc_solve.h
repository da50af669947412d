// A sparse mixed-integer program and its solution by CBC, so that CBC's headers stay in one
// .cpp file.  One thread, deterministic, silent, under a wall-clock limit that holds even while
// CBC solves its root LP (it runs in a child process, killed a second after the limit).
// Usage: MipModel m; int x = m.add_col(0, 1, 3.0, true); m.add_row({{x, 1.0}}, 1, kInf);
#pragma once
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

namespace remat::sim::detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

class MipModel {
 public:
  struct Column {
    double lb, ub, obj;
    bool integer;
  };
  using Terms = std::vector<std::pair<int, double>>;

  int add_col(double lb, double ub, double obj, bool integer);
  // lb <= sum(coef * x[col]) <= ub; either bound may be infinite.
  void add_row(const Terms& terms, double lb, double ub);
  // Values for some integer columns (the others 0) of a feasible solution to start from.
  void set_start(std::vector<std::pair<int, double>> values) { start_ = std::move(values); }

  const std::vector<Column>& cols() const { return cols_; }
  std::size_t rows() const { return row_lb_.size(); }

 private:
  friend struct CbcRun;
  std::vector<Column> cols_;
  std::vector<double> row_lb_, row_ub_;
  std::vector<int> entry_row_, entry_col_;
  std::vector<double> entry_value_;
  std::vector<std::pair<int, double>> start_;
};

struct MipSolution {
  enum class Status { Optimal, TimeLimit, Infeasible };
  Status status = Status::Infeasible;
  double objective = kInf;  // of the best solution found; infinite when none
  double bound = 0;         // proven lower bound (minimisation)
  std::vector<double> x;    // the best solution found; empty when none
};

// Minimises.  Throws remat::Error when CBC stops for any other reason than the ones above.  A
// killed solve is TimeLimit with no solution and a bound of 0.
MipSolution solve_with_cbc(const MipModel& model, double time_limit_seconds);

}  // namespace remat::sim::detail
