// A pool on the segment allocator (a GPU's, here over host memory): the budget counts what the
// segments hold, and memory that runs out below the budget is an OutOfBudget naming the device
// and what it held, never a crash.
#include "core/segment_allocator.h"
#include "dtr/errors.h"
#include "dtr/pool.h"
#include "support/test_util.h"

namespace remat {
namespace {

constexpr std::size_t kMiB = 1 << 20;

struct SegmentPool {
  explicit SegmentPool(std::size_t capacity) {
    auto s = std::make_unique<HostSegmentSource>(capacity);
    source = s.get();
    allocator = make_segment_allocator(std::move(s));
    pool = std::make_unique<Pool>(Device::cpu(), allocator.get());
  }
  HostSegmentSource* source;
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<Pool> pool;
};

TEST(SegmentPool, StatsCountHeldBytesAndFragmentation) {
  SegmentPool p(64 * kMiB);
  auto a = p.pool->new_constant(1000), b = p.pool->new_constant(3 * kMiB);
  const DtrStats s = p.pool->stats();
  EXPECT_EQ(s.held_bytes, p.source->mapped_bytes());  // a 2 MiB and a 20 MiB segment
  EXPECT_EQ(s.held_bytes, SegmentSizes::kSmallSegment + SegmentSizes::kMediumSegment);
  EXPECT_EQ(s.fragmentation_bytes, s.held_bytes - 1000 - 3 * kMiB);
  EXPECT_EQ(s.largest_free_block, SegmentSizes::kMediumSegment - 3 * kMiB);
}

TEST(SegmentPool, ABudgetCountsWholeSegments) {
  SegmentPool p(64 * kMiB);
  DtrConfig cfg;
  cfg.budget = 3 * kMiB;  // a 3 MiB request needs a 20 MiB segment
  p.pool->configure(cfg);
  auto small = p.pool->new_constant(kMiB);  // a 2 MiB segment: fits
  EXPECT_TRUE(testing::throws_with([&] { p.pool->new_constant(3 * kMiB); }, {"constant"}));
  try {
    p.pool->new_constant(3 * kMiB);
  } catch (const OutOfBudget& e) {
    EXPECT_EQ(e.budget(), 3 * kMiB);
    // The smallest budget counts the segments, not only the tensors: 1 MiB + 3 MiB of tensors
    // hold a 2 MiB and a 20 MiB segment, and the message says where the rest goes.
    EXPECT_EQ(e.unevictable().cached,
              SegmentSizes::kSmallSegment + SegmentSizes::kMediumSegment - 4 * kMiB);
    EXPECT_EQ(e.smallest_budget(), SegmentSizes::kSmallSegment + SegmentSizes::kMediumSegment);
    EXPECT_NE(std::string(e.what()).find("held by the allocator beside the tensors"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(p.source->mapped_bytes(), SegmentSizes::kSmallSegment);  // nothing mapped beyond it
  // The budget it names is enough.
  cfg.budget = SegmentSizes::kSmallSegment + SegmentSizes::kMediumSegment;
  p.pool->configure(cfg);
  EXPECT_NO_THROW(p.pool->new_constant(3 * kMiB));
}

TEST(SegmentPool, ExhaustedMemoryIsOutOfBudgetNotACrash) {
  SegmentPool p(24 * kMiB);  // the "device" has 24 MiB, no budget is set
  auto a = p.pool->new_constant(12 * kMiB);
  EXPECT_TRUE(testing::throws_with([&] { p.pool->new_constant(16 * kMiB); },
                                   {"memory is exhausted", "cpu", "constant"}));
  bool caught = false;
  try {
    p.pool->new_constant(16 * kMiB);
  } catch (const OutOfBudget& e) {
    caught = true;
    EXPECT_EQ(e.needed(), 16 * kMiB);
    EXPECT_GE(e.unevictable().constants, 12 * kMiB);
  }
  EXPECT_TRUE(caught);
  // The pool is consistent afterwards: what fits still allocates.
  auto b = p.pool->new_constant(10 * kMiB);  // a 10 MiB segment: 22 MiB mapped
  EXPECT_EQ(p.pool->resident_bytes(), 22 * kMiB);
}

}  // namespace
}  // namespace remat
