// The data-parallel flags of the training examples (--dist-timeout, --bucket-kib,
// --no-broadcast-buffers) and the pieces they share under `mpirun -np N`: joining the job,
// one printed log (rank 0's), the summary's fields, and ending every rank after a failure.
// Usage: DistFlags d; d.add_to(app); CLI11_PARSE(...); auto& world = d.init();
//        dist::DistributedDataParallel ddp(model, world, d.options());
//        catch (...) { return d.fail(1); }
#pragma once
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "dist/dist.h"
#include "examples/common/flag_checks.h"

namespace remat::examples {

struct DistFlags {
  double timeout_seconds = 300;
  std::size_t bucket_kib = 1024;
  bool no_broadcast_buffers = false;
  dist::Communicator* world = nullptr;

  void add_to(CLI::App& app) {
    app.add_option("--dist-timeout", timeout_seconds,
                   "under mpirun: seconds a collective may wait without progress before the job "
                   "stops, naming the rank it waited for")
        ->check(positive_real());
    app.add_option("--bucket-kib", bucket_kib,
                   "under mpirun: gradients are averaged in buckets of about this many KiB, each "
                   "as soon as backward has produced it")
        ->check(whole_in_range<std::size_t>(1, std::size_t{1} << 30));
    app.add_flag("--no-broadcast-buffers", no_broadcast_buffers,
                 "under mpirun: keep each rank's batch-norm running statistics instead of copying "
                 "rank 0's before every training forward");
  }

  // Joins the job: MPI's world under mpirun, otherwise a group of one.  Ranks other than 0
  // print nothing to stdout (errors still reach stderr), so the job prints one log and one
  // summary.
  dist::Communicator& init() {
    world = &dist::init({.timeout = std::chrono::duration<double>(timeout_seconds)});
    if (world->rank() != 0) std::fflush(stdout), std::freopen("/dev/null", "w", stdout);
    return *world;
  }
  bool is_root() const { return world == nullptr || world->rank() == 0; }

  dist::DataParallelOptions options() const {
    return {.bucket_bytes = bucket_kib * 1024, .broadcast_buffers = !no_broadcast_buffers};
  }

  static nlohmann::json summary(const dist::DistributedDataParallel& ddp) {
    const dist::DataParallelStats s = ddp.stats();
    return {{"world_size", ddp.communicator().size()},
            {"gradient_buckets", ddp.num_buckets()},
            {"allreduce_seconds", s.communication_seconds},
            {"allreduce_wait_seconds", s.wait_seconds},
            {"broadcast_seconds", s.broadcast_seconds}};
  }

  // After a failure: a job of several ranks is ended on every rank (the others would wait in
  // a collective until the timeout); a single process just returns `code`.
  int fail(int code) const {
    if (world != nullptr && world->size() > 1) world->abort(code);
    return code;
  }
};

}  // namespace remat::examples
