#include "sim/cbc_solve.h"

#include <Cbc_C_Interface.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/error.h"

namespace remat::sim::detail {

int MipModel::add_col(double lb, double ub, double obj, bool integer) {
  cols_.push_back({lb, ub, obj, integer});
  return static_cast<int>(cols_.size() - 1);
}

void MipModel::add_row(const Terms& terms, double lb, double ub) {
  const int row = static_cast<int>(row_lb_.size());
  for (const auto& [col, coef] : terms) {
    if (coef == 0) continue;
    entry_row_.push_back(row);
    entry_col_.push_back(col);
    entry_value_.push_back(coef);
  }
  row_lb_.push_back(lb);
  row_ub_.push_back(ub);
}

namespace {
double coin(double v) {
  return std::isinf(v) ? (v > 0 ? DBL_MAX : -DBL_MAX) : v;
}
}  // namespace

struct CbcRun {
  static MipSolution solve(const MipModel& m, double time_limit_seconds) {
    const int ncols = static_cast<int>(m.cols_.size()), nrows = static_cast<int>(m.rows());
    // Column-major arrays, as Cbc_loadProblem wants them.
    std::vector<CoinBigIndex> start(static_cast<std::size_t>(ncols) + 1, 0);
    for (int c : m.entry_col_) ++start[static_cast<std::size_t>(c) + 1];
    for (int c = 0; c < ncols; ++c) start[c + 1] += start[c];
    std::vector<int> index(m.entry_col_.size());
    std::vector<double> value(m.entry_col_.size());
    std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
    for (std::size_t e = 0; e < m.entry_col_.size(); ++e) {
      const auto at = fill[m.entry_col_[e]]++;
      index[at] = m.entry_row_[e];
      value[at] = m.entry_value_[e];
    }
    std::vector<double> lb(ncols), ub(ncols), obj(ncols), rlb(nrows), rub(nrows);
    for (int c = 0; c < ncols; ++c)
      lb[c] = coin(m.cols_[c].lb), ub[c] = coin(m.cols_[c].ub), obj[c] = m.cols_[c].obj;
    for (int r = 0; r < nrows; ++r) rlb[r] = coin(m.row_lb_[r]), rub[r] = coin(m.row_ub_[r]);

    std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)> model(Cbc_newModel(), Cbc_deleteModel);
    Cbc_Model* cbc = model.get();
    Cbc_loadProblem(cbc, ncols, nrows, start.data(), index.data(), value.data(), lb.data(),
                    ub.data(), obj.data(), rlb.data(), rub.data());
    for (int c = 0; c < ncols; ++c)
      if (m.cols_[c].integer) Cbc_setInteger(cbc, c);
    Cbc_setObjSense(cbc, 1);
    if (!m.start_.empty()) {
      std::vector<int> cols;
      std::vector<double> vals;
      for (const auto& [c, v] : m.start_) cols.push_back(c), vals.push_back(v);
      Cbc_setMIPStartI(cbc, static_cast<int>(cols.size()), cols.data(), vals.data());
    }
    // Silent, one thread (deterministic), wall-clock limit.
    Cbc_setLogLevel(cbc, 0);
    Cbc_setParameter(cbc, "log", "0");
    Cbc_setParameter(cbc, "slog", "0");
    Cbc_setParameter(cbc, "threads", "0");
    Cbc_setParameter(cbc, "timeMode", "elapsed");
    Cbc_setParameter(cbc, "sec", std::to_string(std::max(time_limit_seconds, 0.01)).c_str());
    Cbc_setMaximumSeconds(cbc, std::max(time_limit_seconds, 0.01));
    // Costs are sums of recorded costs; stop only when the gap is closed.
    Cbc_setAllowableGap(cbc, 1e-9);
    Cbc_setAllowableFractionGap(cbc, 1e-9);
    Cbc_solve(cbc);

    MipSolution s;
    const bool lp = std::none_of(m.cols_.begin(), m.cols_.end(),
                                 [](const MipModel::Column& c) { return c.integer; });
    // A model without integer columns is an LP: CBC keeps its solution as the column values,
    // not as a best (integer) solution.
    const double* best =
        lp && Cbc_isProvenOptimal(cbc) ? Cbc_getColSolution(cbc) : Cbc_bestSolution(cbc);
    const int status = Cbc_status(cbc);
    if (best) {
      s.x.assign(best, best + ncols);
      s.objective = Cbc_getObjValue(cbc);
    }
    s.bound = Cbc_getBestPossibleObjValue(cbc);
    if (Cbc_isProvenOptimal(cbc)) {
      s.status = MipSolution::Status::Optimal;
      s.bound = s.objective;
    } else if (Cbc_isProvenInfeasible(cbc)) {
      s.status = MipSolution::Status::Infeasible;
      s.x.clear();
      s.objective = kInf;
    } else if (Cbc_isSecondsLimitReached(cbc) || (status == 1 && Cbc_secondaryStatus(cbc) == 4)) {
      s.status = MipSolution::Status::TimeLimit;
    } else {
      REMAT_THROW(
          "CBC stopped without an answer (status {}, secondary status {}) on a model of {} columns "
          "and {} rows",
          status, Cbc_secondaryStatus(cbc), ncols, nrows);
    }
    return s;
  }
};

namespace {

// The child's answer on the pipe: a header, then the solution.
struct Wire {
  int status;  // MipSolution::Status, or -1 for an error whose text follows
  double objective, bound;
  std::uint64_t count;  // doubles (or characters of the error) after the header
};

bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= static_cast<std::size_t>(w);
  }
  return true;
}

void child(const MipModel& model, double limit, int fd) {
  std::string error;
  MipSolution s;
  try {
    s = CbcRun::solve(model, limit);
  } catch (const std::exception& e) {
    error = e.what();
  }
  Wire w{error.empty() ? static_cast<int>(s.status) : -1, s.objective, s.bound,
         error.empty() ? s.x.size() : error.size()};
  bool ok = write_all(fd, &w, sizeof w);
  if (ok && error.empty()) ok = write_all(fd, s.x.data(), s.x.size() * sizeof(double));
  if (ok && !error.empty()) ok = write_all(fd, error.data(), error.size());
  ::_exit(ok ? 0 : 1);
}

}  // namespace

MipSolution solve_with_cbc(const MipModel& model, double time_limit_seconds) {
  // CBC 2.10 looks at its clock only between steps of the search: the root LP of a model with
  // tens of thousands of rows can run minutes past the limit.  So CBC runs in a child process,
  // told 85% of the limit and killed a second after all of it; its best is then lost.
  std::fflush(nullptr);  // else the child's exit path may write the parent's buffered output too
  int fds[2];
  if (::pipe(fds) != 0) return CbcRun::solve(model, time_limit_seconds);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]), ::close(fds[1]);
    return CbcRun::solve(model, time_limit_seconds);
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(model, 0.85 * time_limit_seconds, fds[1]);  // room to finish the step it is in
  }
  ::close(fds[1]);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(time_limit_seconds + 1);
  std::string bytes;
  bool finished = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buf[1 << 16];
    const ssize_t r = ::read(fds[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      finished = true;  // the child closed the pipe: it is done
      break;
    }
    bytes.append(buf, static_cast<std::size_t>(r));
  }
  ::close(fds[0]);
  if (!finished) ::kill(pid, SIGKILL);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  MipSolution s;
  if (!finished) {
    s.status = MipSolution::Status::TimeLimit;  // nothing found that we can see, no bound
    return s;
  }
  Wire w{};
  REMAT_CHECK(bytes.size() >= sizeof w, "CBC's process ended without an answer (wait status {})",
              wstatus);
  std::memcpy(&w, bytes.data(), sizeof w);
  const char* body = bytes.data() + sizeof w;
  if (w.status < 0) REMAT_THROW("{}", std::string(body, bytes.size() - sizeof w));
  REMAT_CHECK(bytes.size() == sizeof w + w.count * sizeof(double),
              "CBC's process sent {} bytes, not {}", bytes.size(),
              sizeof w + w.count * sizeof(double));
  s.status = static_cast<MipSolution::Status>(w.status);
  s.objective = w.objective;
  s.bound = w.bound;
  s.x.resize(w.count);
  // No incumbent (a time limit reached first) sends no values: memcpy must not see a null.
  if (w.count > 0) std::memcpy(s.x.data(), body, w.count * sizeof(double));
  return s;
}

}  // namespace remat::sim::detail
