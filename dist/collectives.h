// Collectives built on a Communicator's point-to-point transfers, so every backend gets the
// same algorithms, the same reduction order and the same timeout: a ring allreduce that can
// run in the background of a backward pass, a binomial-tree broadcast, and a barrier.
// Reduction order is fixed by the ring (chunk k's partial sums travel ranks k+1, k+2, ... k),
// so results are bit-identical across runs and on every rank.
// Usage: RingAllreduce ar(comm, data, DType::Float32, n, scratch.data(), "gradient bucket 0");
//        while (!ar.progress()) do_other_work();   // or ar.wait()
//        allreduce_sum(comm, std::span<double>(totals));
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "dist/communicator.h"

namespace remat::dist {

// Sums `count` elements of `dtype` (Float32, Float64 or Int64) at `data` over every rank, in
// place.  Non-blocking: the constructor posts the first transfers, progress() advances.
// `data` and `scratch` (scratch_elements(count, size) elements) must stay alive and untouched
// until done.
class RingAllreduce {
 public:
  RingAllreduce(Communicator& comm, void* data, DType dtype, std::size_t count, void* scratch,
                std::string what);
  static std::size_t scratch_elements(std::size_t count, int ranks);
  // Advances as far as it can without blocking; true when the sum is complete.
  bool progress();
  // Blocks until complete; CollectiveTimeout when no transfer completes for comm.timeout().
  void wait();
  bool done() const { return step_ >= total_steps_; }

 private:
  void post_step();
  void finish_step();
  std::size_t chunk_begin(int k) const;
  std::size_t chunk_size(int k) const { return chunk_begin(k + 1) - chunk_begin(k); }
  std::byte* chunk_data(int k) const;
  int mod(int k) const { return ((k % ranks_) + ranks_) % ranks_; }

  Communicator& comm_;
  std::byte* data_;
  std::byte* scratch_;
  DType dtype_;
  std::size_t count_;
  std::string what_;
  int rank_, ranks_, tag_;
  int step_ = 0, total_steps_;
  std::unique_ptr<Request> send_, recv_;
  std::chrono::steady_clock::time_point last_progress_;
};

// Blocking sum of `values` over every rank (a RingAllreduce with its own scratch).
void allreduce_sum(Communicator& comm, std::span<double> values, std::string_view what);
void allreduce_sum(Communicator& comm, std::span<float> values, std::string_view what);
// Copies rank `root`'s `bytes` bytes at `data` into every rank's `data`.
void broadcast(Communicator& comm, void* data, std::size_t bytes, int root, std::string_view what);
// Returns on each rank once every rank has called it.
void barrier(Communicator& comm, std::string_view what);

namespace detail {
// Polls `request` until it completes: spins briefly, then sleeps between tests, so a waiting
// rank leaves its core to a rank still computing.  CollectiveTimeout naming `peer` and `what`
// after comm.timeout() without completion.
void wait(Communicator& comm, Request& request, int peer, std::string_view what);
// The pause between polls of a transfer: spin for the first few, then sleep briefly.
void pause_between_polls(int attempt);
[[noreturn]] void throw_timeout(const Communicator& comm, int peer, std::string_view what);
}  // namespace detail

}  // namespace remat::dist
