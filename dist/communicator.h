// A process's view of the group it trains with: its rank, the group's size, and non-blocking
// point-to-point byte transfers, from which dist/collectives.h builds broadcast and a
// deterministic allreduce.  Backends: MPI (a job started by mpirun), "local" (a group of one)
// and an in-process loopback group for tests; NCCL would be one more implementation.
// Usage: Communicator& world = dist::init();  // under mpirun -np N: rank 0..N-1 of N
//        auto r = world.irecv(buf, n, /*peer=*/0, /*tag=*/7); while (!r->test()) {}
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace remat::dist {

// A collective that made no progress for the communicator's timeout: a peer died, hangs, or
// called a different collective.  The message names the rank waited for.
class CollectiveTimeout : public Error {
 public:
  using Error::Error;
};

// A transfer in flight.  Its buffer must stay alive and untouched until test() is true.
class Request {
 public:
  virtual ~Request() = default;
  // True once the transfer has completed (never blocks; drives the backend's progress).
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  // Transfers `bytes` bytes to or from rank `peer`.  Messages between two ranks with the same
  // tag arrive in the order sent.
  virtual std::unique_ptr<Request> isend(const void* data, std::size_t bytes, int peer,
                                         int tag) = 0;
  virtual std::unique_ptr<Request> irecv(void* data, std::size_t bytes, int peer, int tag) = 0;

  // Ends the whole job with `code` (every rank), after a failure that leaves collectives
  // unmatched.  A group of one just exits.
  [[noreturn]] virtual void abort(int code) = 0;

  // How long a collective may wait without any progress before it throws CollectiveTimeout.
  std::chrono::duration<double> timeout() const { return timeout_; }
  void set_timeout(std::chrono::duration<double> t);

  // Tags for collectives: every rank calls the same collectives in the same order, so each
  // gets the same tag on every rank, and concurrent ones do not match each other's messages.
  int next_collective_tag();

 private:
  std::chrono::duration<double> timeout_{300.0};
  int next_tag_ = 0;
};

// A group of one process: transfers to itself are an error (collectives never make them).
std::unique_ptr<Communicator> make_local_communicator();

// `size` communicators of one in-process group, for threads standing in for processes (tests).
// Sends are buffered, so they complete at once; receives complete when a matching send came.
std::vector<std::unique_ptr<Communicator>> make_loopback_group(int size);

struct InitOptions {
  std::chrono::duration<double> timeout{300.0};
};

// Joins the job this process was started in: MPI's world under mpirun (or srun), otherwise a
// group of one.  The first call initialises; later calls return the same communicator (and
// set the timeout).  Under MPI, finalisation runs at exit.  A job of several processes in a
// build without MPI is an error that says so.
Communicator& init(const InitOptions& options = {});
// The communicator init() made; an error before init().
Communicator& world();
// True when init() has run.
bool initialized();
// True when this process looks started by an MPI launcher (its environment names a rank).
bool launched_by_mpi();
// True when this build has the MPI backend.
bool has_mpi();

}  // namespace remat::dist
