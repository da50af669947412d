// The segment allocator a GPU's pool runs on, over host memory: rounding, segment sizes, best
// fit, splitting and merging, what cached_bytes() counts, releasing whole segments only, and
// the out-of-memory path (a null block, after the free segments were given back).
#include "core/segment_allocator.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"

namespace remat {
namespace {

using S = SegmentSizes;
constexpr std::size_t kMiB = 1 << 20;

struct Fixture {
  explicit Fixture(std::size_t capacity = 1024 * kMiB) {
    auto s = std::make_unique<HostSegmentSource>(capacity);
    source = s.get();
    a = make_segment_allocator(std::move(s));
  }
  HostSegmentSource* source;
  std::unique_ptr<Allocator> a;
};

TEST(SegmentAllocator, RoundsTo512AndSharesSmallSegments) {
  Fixture f;
  EXPECT_EQ(f.a->size_class(1), 512u);
  EXPECT_EQ(f.a->size_class(512), 512u);
  EXPECT_EQ(f.a->size_class(513), 1024u);
  Block b1 = f.a->allocate(100), b2 = f.a->allocate(1000);
  EXPECT_EQ(b1.size, 512u);
  EXPECT_EQ(b2.size, 1024u);
  EXPECT_EQ(f.source->maps(), 1u);  // one 2 MiB segment serves both
  EXPECT_EQ(f.source->mapped_bytes(), S::kSmallSegment);
  EXPECT_EQ(static_cast<char*>(b2.ptr), static_cast<char*>(b1.ptr) + 512);  // split, in order
  // Held minus requested: the rest of the segment and both blocks' rounding.
  EXPECT_EQ(f.a->cached_bytes(), S::kSmallSegment - 1100);
  std::memset(b2.ptr, 1, 1000);  // real memory
  f.a->deallocate(b1), f.a->deallocate(b2);
  EXPECT_EQ(f.a->cached_bytes(), S::kSmallSegment);
  EXPECT_EQ(f.a->largest_free_block(), S::kSmallSegment);  // merged back into one block
}

TEST(SegmentAllocator, SegmentSizesFollowTheRequest) {
  Fixture f;
  Block medium = f.a->allocate(3 * kMiB);  // under 10 MiB: a 20 MiB segment
  EXPECT_EQ(f.source->mapped_bytes(), S::kMediumSegment);
  Block from_rest = f.a->allocate(11 * kMiB);  // the 17 MiB rest serves it, split again
  EXPECT_EQ(f.source->maps(), 1u);
  EXPECT_EQ(static_cast<char*>(from_rest.ptr), static_cast<char*>(medium.ptr) + 3 * kMiB);
  EXPECT_EQ(from_rest.size, 11 * kMiB);
  Block large = f.a->allocate(13 * kMiB);  // 6 MiB left: a segment of 14 MiB (2 MiB multiple)
  EXPECT_EQ(f.source->mapped_bytes(), S::kMediumSegment + 14 * kMiB);
  EXPECT_EQ(large.size, 14 * kMiB);  // a 1 MiB rest is not split off: the block is the segment
  Block small = f.a->allocate(4096);
  EXPECT_EQ(f.source->maps(), 3u);  // small requests never come from large segments
  for (Block b : {medium, from_rest, large, small}) f.a->deallocate(b);
}

TEST(SegmentAllocator, LargeTailsSplitOnlyAboveOneMiB) {
  Fixture f;
  // 11 MiB from a 12 MiB segment: the 1 MiB rest is not split off (PyTorch's rule), so the
  // block is the whole segment.
  Block b = f.a->allocate(11 * kMiB);
  Block other = f.a->allocate(11 * kMiB - 100);
  EXPECT_EQ(f.source->maps(), 2u);
  f.a->deallocate(b), f.a->deallocate(other);
  // 3 MiB from a 20 MiB segment splits; the 17 MiB tail serves the next medium request.
  Block m1 = f.a->allocate(3 * kMiB), m2 = f.a->allocate(5 * kMiB);
  EXPECT_EQ(static_cast<char*>(m2.ptr), static_cast<char*>(m1.ptr) + 3 * kMiB);
  f.a->deallocate(m1), f.a->deallocate(m2);
}

TEST(SegmentAllocator, BestFitAndMergingOfNeighbours) {
  Fixture f;
  Block a = f.a->allocate(4096), b = f.a->allocate(8192), c = f.a->allocate(4096),
        d = f.a->allocate(16384);
  f.a->deallocate(b);  // an 8 KiB hole between a and c
  Block e = f.a->allocate(8000);
  EXPECT_EQ(e.ptr, b.ptr);  // the hole is the best fit, not the segment's tail
  f.a->deallocate(e);
  f.a->deallocate(a);  // joins the hole at its start
  f.a->deallocate(c);  // and at its end: one block of 16 KiB before d
  Block g = f.a->allocate(16384);
  EXPECT_EQ(g.ptr, a.ptr);
  EXPECT_FALSE(f.a->fits_if_freed(d, 2 * kMiB));  // a small block never serves a medium request
  f.a->deallocate(g);
  f.a->deallocate(d);
  EXPECT_EQ(f.a->largest_free_block(), S::kSmallSegment);
}

TEST(SegmentAllocator, FitsIfFreedCountsFreeNeighbours) {
  Fixture f;
  Block a = f.a->allocate(4096), b = f.a->allocate(4096), c = f.a->allocate(4096);
  Block fill1 = f.a->allocate(kMiB), fill2 = f.a->allocate(kMiB - 3 * 4096);  // segment full
  EXPECT_EQ(f.source->maps(), 1u);
  EXPECT_EQ(f.a->largest_free_block(), 0u);
  f.a->deallocate(a), f.a->deallocate(c);
  EXPECT_FALSE(f.a->has_cached(8192));
  EXPECT_TRUE(f.a->fits_if_freed(b, 3 * 4096));  // a + b + c
  EXPECT_FALSE(f.a->fits_if_freed(b, 3 * 4096 + 512));
  EXPECT_TRUE(f.a->merges_free_blocks());
  for (Block x : {b, fill1, fill2}) f.a->deallocate(x);
}

TEST(SegmentAllocator, CachedAfterSaysWhatAFreshSegmentBrings) {
  Fixture f;
  EXPECT_EQ(f.a->cached_after(1000), S::kSmallSegment - 1000);  // a new segment
  Block b = f.a->allocate(1000);
  EXPECT_EQ(f.a->cached_after(1000), f.a->cached_bytes() - 1000);  // from the cache
  EXPECT_EQ(f.a->cached_after(3 * kMiB), f.a->cached_bytes() + S::kMediumSegment - 3 * kMiB);
  f.a->deallocate(b);
}

TEST(SegmentAllocator, ReleasesOnlyWholeFreeSegmentsKeepingTheOneAboutToBeUsed) {
  Fixture f;
  Block s1 = f.a->allocate(S::kSmallRequest), s2 = f.a->allocate(S::kSmallRequest);
  Block s3 = f.a->allocate(S::kSmallRequest);  // a second small segment
  Block l = f.a->allocate(12 * kMiB);
  EXPECT_EQ(f.source->maps(), 3u);
  f.a->deallocate(s3), f.a->deallocate(l);
  // Keeping what a small request would use: only the large segment goes.
  EXPECT_EQ(f.a->release_cached(static_cast<std::size_t>(-1), 4096), 12 * kMiB);
  EXPECT_EQ(f.a->release_cached(static_cast<std::size_t>(-1)), S::kSmallSegment);
  EXPECT_EQ(f.source->unmaps(), 2u);
  f.a->deallocate(s1);  // its segment still holds s2: nothing to release there
  EXPECT_EQ(f.a->release_cached(static_cast<std::size_t>(-1)), 0u);
  f.a->deallocate(s2);
  f.a->release_all_cached();
  EXPECT_EQ(f.source->mapped_bytes(), 0u);
  EXPECT_EQ(f.a->cached_bytes(), 0u);
}

TEST(SegmentAllocator, OutOfMemoryGivesBackFreeSegmentsThenANullBlock) {
  Fixture f(24 * kMiB);
  Block small = f.a->allocate(4096);
  f.a->deallocate(small);                // a free 2 MiB segment, cached
  Block big = f.a->allocate(23 * kMiB);  // a 24 MiB segment: needs the cached segment's memory back
  ASSERT_NE(big.ptr, nullptr);
  EXPECT_EQ(f.source->unmaps(), 1u);
  Block none = f.a->allocate(4 * kMiB);  // 20 MiB more cannot be had
  EXPECT_EQ(none.ptr, nullptr);
  f.a->deallocate(none);  // a null block is ignored, as free(nullptr)
  f.a->deallocate(big);
}

TEST(SegmentAllocator, UnknownBlocksAreAnError) {
  Fixture f;
  int x = 0;
  EXPECT_THROW(f.a->deallocate({&x, 512}), Error);
}

}  // namespace
}  // namespace remat
