// The collectives on an in-process loopback group (threads standing in for ranks): the ring
// allreduce sums exactly what a sequential sum gives up to float order, the same bits on every
// rank and in every run, for any count and group size; broadcast from any root; a rank that
// never comes makes the others time out with an error naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "dist/dist.h"

namespace remat::dist {
namespace {

// Runs fn(comm) on every rank of a loopback group of `size`, one thread each; rethrows the first
// failure.
void run_group(int size, const std::function<void(Communicator&)>& fn) {
  auto group = make_loopback_group(size);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(*group[static_cast<std::size_t>(r)]);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Rank r's value of element i: different magnitudes, so float order shows in the bits.
double value(int rank, std::size_t i) {
  return std::sin(0.37 * static_cast<double>(i) + rank) * std::pow(10.0, (rank + i) % 5);
}

TEST(RingAllreduce, SumsOverEveryGroupSizeAndCount) {
  for (int size : {1, 2, 3, 4, 5}) {
    for (std::size_t count : {0, 1, 3, 7, 1000}) {
      std::vector<std::vector<double>> results(static_cast<std::size_t>(size));
      run_group(size, [&](Communicator& comm) {
        std::vector<double> v(count);
        for (std::size_t i = 0; i < count; ++i) v[i] = value(comm.rank(), i);
        allreduce_sum(comm, std::span<double>(v), "test");
        results[static_cast<std::size_t>(comm.rank())] = v;
      });
      for (std::size_t i = 0; i < count; ++i) {
        double expected = 0;
        for (int r = 0; r < size; ++r) expected += value(r, i);
        EXPECT_NEAR(results[0][i], expected, 1e-12 * (1 + std::abs(expected)))
            << "size " << size << " count " << count << " element " << i;
        for (int r = 1; r < size; ++r)  // every rank holds the same bits
          EXPECT_EQ(results[static_cast<std::size_t>(r)][i], results[0][i]);
      }
    }
  }
}

TEST(RingAllreduce, SameBitsInEveryRun) {
  auto run = [] {
    std::vector<float> out;
    run_group(4, [&](Communicator& comm) {
      std::vector<float> v(257);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(value(comm.rank(), i));
      allreduce_sum(comm, std::span<float>(v), "test");
      if (comm.rank() == 0) out = v;
    });
    return out;
  };
  const auto first = run();
  for (int k = 0; k < 3; ++k) EXPECT_EQ(run(), first);
}

TEST(RingAllreduce, IntegersAreExactAndSeveralRunAtOnce) {
  run_group(3, [](Communicator& comm) {
    std::vector<std::int64_t> a(10, comm.rank() + 1), b(5, 100 * (comm.rank() + 1));
    std::vector<std::int64_t> sa(RingAllreduce::scratch_elements(a.size(), 3));
    std::vector<std::int64_t> sb(RingAllreduce::scratch_elements(b.size(), 3));
    RingAllreduce ra(comm, a.data(), DType::Int64, a.size(), sa.data(), "a");
    RingAllreduce rb(comm, b.data(), DType::Int64, b.size(), sb.data(), "b");
    while (!(ra.progress() & rb.progress())) std::this_thread::yield();
    for (auto x : a) EXPECT_EQ(x, 6);
    for (auto x : b) EXPECT_EQ(x, 600);
  });
}

TEST(Broadcast, CopiesTheRootsBytesFromAnyRoot) {
  for (int size : {1, 2, 3, 6}) {
    for (int root = 0; root < size; ++root) {
      run_group(size, [&](Communicator& comm) {
        std::vector<int> v(33, comm.rank() == root ? 7 + root : -1);
        broadcast(comm, v.data(), v.size() * sizeof(int), root, "test");
        for (int x : v) EXPECT_EQ(x, 7 + root) << "rank " << comm.rank() << " root " << root;
      });
    }
  }
}

TEST(Collectives, AMissingRankIsATimeoutNamingIt) {
  auto group = make_loopback_group(2);
  group[0]->set_timeout(std::chrono::milliseconds(200));
  double x = 1;
  try {
    allreduce_sum(*group[0], std::span<double>(&x, 1), "the test's allreduce");
    FAIL() << "expected a timeout";
  } catch (const CollectiveTimeout& e) {
    EXPECT_NE(std::string(e.what()).find("the test's allreduce on rank 0 of 2"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("waiting for rank 1"), std::string::npos) << e.what();
  }
}

TEST(Communicator, ALocalGroupIsOneRankAndRejectsBadInput) {
  auto local = make_local_communicator();
  EXPECT_EQ(local->size(), 1);
  EXPECT_EQ(local->rank(), 0);
  double x = 5;
  allreduce_sum(*local, std::span<double>(&x, 1), "test");
  EXPECT_EQ(x, 5);
  EXPECT_THROW(local->isend(&x, 8, 1, 0), Error);
  EXPECT_THROW(local->set_timeout(std::chrono::seconds(0)), Error);
  EXPECT_THROW(broadcast(*local, &x, 8, 1, "test"), Error);
  EXPECT_THROW(make_loopback_group(0), Error);
}

}  // namespace
}  // namespace remat::dist
