#include "dist/collectives.h"

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace remat::dist {

namespace detail {

void pause_between_polls(int attempt) {
  if (attempt < 64) return;  // a message from a rank that is also waiting arrives in microseconds
  if (attempt < 1024) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void throw_timeout(const Communicator& comm, int peer, std::string_view what) {
  throw CollectiveTimeout(fmt::format(
      "dist: {} on rank {} of {} made no progress for {:.0f} s waiting for rank {} (it died, "
      "hangs, or called a different collective)",
      what, comm.rank(), comm.size(), comm.timeout().count(), peer));
}

void wait(Communicator& comm, Request& request, int peer, std::string_view what) {
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 0; !request.test(); ++attempt) {
    if (std::chrono::steady_clock::now() - start > comm.timeout()) throw_timeout(comm, peer, what);
    pause_between_polls(attempt);
  }
}

}  // namespace detail

namespace {

template <class T>
void add_into(std::byte* dst, const std::byte* src, std::size_t n) {
  auto* d = reinterpret_cast<T*>(dst);
  const auto* s = reinterpret_cast<const T*>(src);
  for (std::size_t i = 0; i < n; ++i) d[i] = s[i] + d[i];
}

}  // namespace

RingAllreduce::RingAllreduce(Communicator& comm, void* data, DType dtype, std::size_t count,
                             void* scratch, std::string what)
    : comm_(comm),
      data_(static_cast<std::byte*>(data)),
      scratch_(static_cast<std::byte*>(scratch)),
      dtype_(dtype),
      count_(count),
      what_(std::move(what)),
      rank_(comm.rank()),
      ranks_(comm.size()),
      tag_(comm.next_collective_tag()),
      total_steps_(2 * (comm.size() - 1)),
      last_progress_(std::chrono::steady_clock::now()) {
  REMAT_CHECK(count == 0 || data != nullptr, "{}: no data for {} elements", what_, count);
  REMAT_CHECK(ranks_ == 1 || count == 0 || scratch != nullptr, "{}: no scratch buffer", what_);
  if (!done()) post_step();
}

std::size_t RingAllreduce::scratch_elements(std::size_t count, int ranks) {
  return ranks <= 1
             ? 0
             : (count + static_cast<std::size_t>(ranks) - 1) / static_cast<std::size_t>(ranks);
}

std::size_t RingAllreduce::chunk_begin(int k) const {
  return count_ * static_cast<std::size_t>(k) / static_cast<std::size_t>(ranks_);
}

std::byte* RingAllreduce::chunk_data(int k) const {
  return data_ + chunk_begin(k) * element_size(dtype_);
}

// Steps 0 .. ranks-2 reduce-scatter: send chunk r-s right, receive chunk r-s-1 from the left
// into scratch and add it to ours; afterwards rank r holds the whole sum of chunk r+1.  Steps
// ranks-1 .. 2(ranks-1)-1 pass the finished chunks around the ring into place.
void RingAllreduce::post_step() {
  const int right = mod(rank_ + 1), left = mod(rank_ - 1);
  const std::size_t esize = element_size(dtype_);
  int send_chunk, recv_chunk;
  void* recv_into;
  if (step_ < ranks_ - 1) {
    send_chunk = mod(rank_ - step_);
    recv_chunk = mod(rank_ - step_ - 1);
    recv_into = scratch_;
  } else {
    const int s = step_ - (ranks_ - 1);
    send_chunk = mod(rank_ + 1 - s);
    recv_chunk = mod(rank_ - s);
    recv_into = chunk_data(recv_chunk);
  }
  recv_ = comm_.irecv(recv_into, chunk_size(recv_chunk) * esize, left, tag_);
  send_ = comm_.isend(chunk_data(send_chunk), chunk_size(send_chunk) * esize, right, tag_);
}

void RingAllreduce::finish_step() {
  if (step_ >= ranks_ - 1) return;  // allgather: received in place
  const int k = mod(rank_ - step_ - 1);
  switch (dtype_) {
    case DType::Float32:
      add_into<float>(chunk_data(k), scratch_, chunk_size(k));
      break;
    case DType::Float64:
      add_into<double>(chunk_data(k), scratch_, chunk_size(k));
      break;
    case DType::Int64:
      add_into<std::int64_t>(chunk_data(k), scratch_, chunk_size(k));
      break;
  }
}

bool RingAllreduce::progress() {
  while (!done()) {
    const bool sent = send_->test();
    const bool received = recv_->test();
    if (!sent || !received) return false;
    finish_step();
    ++step_;
    last_progress_ = std::chrono::steady_clock::now();
    send_.reset();
    recv_.reset();
    if (!done()) post_step();
  }
  return true;
}

void RingAllreduce::wait() {
  // Time spent before the wait (the ranks still computing) does not count against the timeout.
  last_progress_ = std::max(last_progress_, std::chrono::steady_clock::now());
  for (int attempt = 0; !progress(); ++attempt) {
    if (std::chrono::steady_clock::now() - last_progress_ > comm_.timeout()) {
      const bool receiving = !recv_->test();
      detail::throw_timeout(comm_, receiving ? mod(rank_ - 1) : mod(rank_ + 1), what_);
    }
    detail::pause_between_polls(attempt);
  }
}

namespace {
template <class T>
void blocking_allreduce(Communicator& comm, std::span<T> values, DType dtype,
                        std::string_view what) {
  std::vector<T> scratch(RingAllreduce::scratch_elements(values.size(), comm.size()));
  RingAllreduce ring(comm, values.data(), dtype, values.size(), scratch.data(), std::string(what));
  ring.wait();
}
}  // namespace

void allreduce_sum(Communicator& comm, std::span<double> values, std::string_view what) {
  blocking_allreduce(comm, values, DType::Float64, what);
}

void allreduce_sum(Communicator& comm, std::span<float> values, std::string_view what) {
  blocking_allreduce(comm, values, DType::Float32, what);
}

// A binomial tree rooted at `root`: ranks numbered relative to it receive from the rank that
// differs in their lowest set bit, then send down to the ranks below that bit.
void broadcast(Communicator& comm, void* data, std::size_t bytes, int root, std::string_view what) {
  const int n = comm.size();
  REMAT_CHECK(root >= 0 && root < n, "dist: {}: root {} is out of range for {} ranks", what, root,
              n);
  const int tag = comm.next_collective_tag();
  if (n == 1) return;
  const int rel = (comm.rank() - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if (rel & mask) {
      const int parent = (rel - mask + root) % n;
      auto r = comm.irecv(data, bytes, parent, tag);
      detail::wait(comm, *r, parent, what);
      break;
    }
    mask <<= 1;
  }
  std::vector<std::pair<int, std::unique_ptr<Request>>> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (rel + mask < n) {
      const int child = (rel + mask + root) % n;
      sends.emplace_back(child, comm.isend(data, bytes, child, tag));
    }
  }
  for (auto& [child, r] : sends) detail::wait(comm, *r, child, what);
}

void barrier(Communicator& comm, std::string_view what) {
  double token = 1;
  allreduce_sum(comm, std::span<double>(&token, 1), what);
}

}  // namespace remat::dist
