#include "dist/communicator.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

#include "dist/mpi_backend.h"

namespace remat::dist {

void Communicator::set_timeout(std::chrono::duration<double> t) {
  REMAT_CHECK(t.count() > 0, "dist: the collective timeout must be positive, got {} s", t.count());
  timeout_ = t;
}

int Communicator::next_collective_tag() {
  // MPI guarantees tags up to 32767; wrapping is safe because messages of one pair of ranks
  // with one tag stay in order.
  const int tag = next_tag_;
  next_tag_ = (next_tag_ + 1) % 32768;
  return tag;
}

namespace {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "local"; }
  std::unique_ptr<Request> isend(const void*, std::size_t, int peer, int) override {
    REMAT_THROW("dist: a group of one has no rank {} to send to", peer);
  }
  std::unique_ptr<Request> irecv(void*, std::size_t, int peer, int) override {
    REMAT_THROW("dist: a group of one has no rank {} to receive from", peer);
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

// The loopback group's shared mailboxes: messages keyed by (source, destination, tag), FIFO.
struct Mailboxes {
  std::mutex mutex;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<std::byte>>> queues;
};

class LoopbackRequest final : public Request {
 public:
  LoopbackRequest(std::shared_ptr<Mailboxes> boxes, std::tuple<int, int, int> key, void* data,
                  std::size_t bytes)
      : boxes_(std::move(boxes)), key_(key), data_(data), bytes_(bytes), done_(data == nullptr) {}
  bool test() override {
    if (done_) return true;
    std::lock_guard lock(boxes_->mutex);
    auto& queue = boxes_->queues[key_];
    if (queue.empty()) return false;
    REMAT_CHECK(queue.front().size() == bytes_,
                "dist: loopback receive of {} bytes from rank {} matched a message of {} bytes",
                bytes_, std::get<0>(key_), queue.front().size());
    if (bytes_ > 0) std::memcpy(data_, queue.front().data(), bytes_);
    queue.pop_front();
    done_ = true;
    return true;
  }

 private:
  std::shared_ptr<Mailboxes> boxes_;
  std::tuple<int, int, int> key_;
  void* data_;
  std::size_t bytes_;
  bool done_;
};

class LoopbackCommunicator final : public Communicator {
 public:
  LoopbackCommunicator(std::shared_ptr<Mailboxes> boxes, int rank, int size)
      : boxes_(std::move(boxes)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "loopback"; }
  std::unique_ptr<Request> isend(const void* data, std::size_t bytes, int peer, int tag) override {
    check_peer(peer);
    const auto* p = static_cast<const std::byte*>(data);
    std::lock_guard lock(boxes_->mutex);
    boxes_->queues[{rank_, peer, tag}].emplace_back(p, p + bytes);
    return std::make_unique<LoopbackRequest>(boxes_, std::tuple{rank_, peer, tag}, nullptr, 0);
  }
  std::unique_ptr<Request> irecv(void* data, std::size_t bytes, int peer, int tag) override {
    check_peer(peer);
    return std::make_unique<LoopbackRequest>(boxes_, std::tuple{peer, rank_, tag}, data, bytes);
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }

 private:
  void check_peer(int peer) const {
    REMAT_CHECK(peer >= 0 && peer < size_ && peer != rank_,
                "dist: rank {} of {} cannot exchange messages with rank {}", rank_, size_, peer);
  }
  std::shared_ptr<Mailboxes> boxes_;
  int rank_, size_;
};

std::unique_ptr<Communicator>& world_slot() {
  static std::unique_ptr<Communicator> world;
  return world;
}

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() {
  return std::make_unique<LocalCommunicator>();
}

std::vector<std::unique_ptr<Communicator>> make_loopback_group(int size) {
  REMAT_CHECK(size >= 1, "make_loopback_group: size must be at least 1, got {}", size);
  auto boxes = std::make_shared<Mailboxes>();
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < size; ++r)
    group.push_back(std::make_unique<LoopbackCommunicator>(boxes, r, size));
  return group;
}

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

bool has_mpi() {
  return detail::mpi_available();
}

Communicator& init(const InitOptions& options) {
  auto& world = world_slot();
  if (!world) {
    if (launched_by_mpi()) {
      REMAT_CHECK(has_mpi(),
                  "dist: this process was started by an MPI launcher, but remat was built "
                  "without MPI; install libopenmpi-dev and rebuild");
      world = detail::make_mpi_communicator();
    } else {
      world = make_local_communicator();
    }
  }
  world->set_timeout(options.timeout);
  return *world;
}

Communicator& world() {
  REMAT_CHECK(world_slot() != nullptr, "dist::world(): call dist::init() first");
  return *world_slot();
}

bool initialized() {
  return world_slot() != nullptr;
}

}  // namespace remat::dist
