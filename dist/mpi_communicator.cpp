#include "dist/mpi_backend.h"

#if REMAT_WITH_MPI
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

namespace remat::dist::detail {
namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  REMAT_THROW("dist: {} failed: {}", what, std::string(text, static_cast<std::size_t>(length)));
}

int byte_count(std::size_t bytes) {
  REMAT_CHECK(bytes <= static_cast<std::size_t>(INT_MAX),
              "dist: one message of {} bytes exceeds MPI's limit of {}", bytes, INT_MAX);
  return static_cast<int>(bytes);
}

class MpiRequest final : public Request {
 public:
  explicit MpiRequest(MPI_Request r) : request_(r) {}
  ~MpiRequest() override {
    // Only after a failure (the job is about to abort): let MPI drop what it still holds.
    if (request_ != MPI_REQUEST_NULL) MPI_Request_free(&request_);
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  }

 private:
  MPI_Request request_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // Only the thread that called init() talks to MPI; kernels' worker threads never do.
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init");
      std::atexit(finalize_at_exit);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  std::unique_ptr<Request> isend(const void* data, std::size_t bytes, int peer, int tag) override {
    MPI_Request r;
    check_mpi(MPI_Isend(data, byte_count(bytes), MPI_BYTE, peer, tag, comm_, &r), "MPI_Isend");
    return std::make_unique<MpiRequest>(r);
  }
  std::unique_ptr<Request> irecv(void* data, std::size_t bytes, int peer, int tag) override {
    MPI_Request r;
    check_mpi(MPI_Irecv(data, byte_count(bytes), MPI_BYTE, peer, tag, comm_, &r), "MPI_Irecv");
    return std::make_unique<MpiRequest>(r);
  }
  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
  }

 private:
  static void finalize_at_exit() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}
bool mpi_available() {
  return true;
}

}  // namespace remat::dist::detail

#else

namespace remat::dist::detail {
std::unique_ptr<Communicator> make_mpi_communicator() {
  REMAT_THROW("dist: remat was built without MPI; install libopenmpi-dev and rebuild");
}
bool mpi_available() {
  return false;
}
}  // namespace remat::dist::detail

#endif
