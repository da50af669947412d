// The CPU caching allocator's books: size classes, cached bytes, and releasing the cache while
// keeping the one block an allocation is about to reuse.  Runs on the accounting allocator (the
// same class without memory), so nothing here touches the process's shared cache.
#include "core/allocator.h"

#include <gtest/gtest.h>

namespace remat {
namespace {

TEST(CachingAllocator, ReusesCachedBlocksOfTheSameClass) {
  auto a = make_accounting_cpu_allocator();
  const std::size_t cls = a->size_class(1000);
  EXPECT_EQ(cls % kBufferAlignment, 0u);
  EXPECT_GE(cls, 1000u);
  Block b = a->allocate(1000);
  EXPECT_EQ(b.size, cls);
  a->deallocate(b);
  EXPECT_EQ(a->cached_bytes(), cls);
  EXPECT_TRUE(a->has_cached(cls));
  Block again = a->allocate(1000);
  EXPECT_EQ(again.ptr, b.ptr);
  EXPECT_EQ(a->cached_bytes(), 0u);
}

TEST(CachingAllocator, ReleaseKeepsOneBlockOfTheClassAboutToBeReused) {
  auto a = make_accounting_cpu_allocator();
  const std::size_t small = a->size_class(1024), large = a->size_class(4096);
  Block b1 = a->allocate(1024), b2 = a->allocate(1024), b3 = a->allocate(1024), big = a->allocate(4096);
  for (Block b : {b1, b2, b3, big}) a->deallocate(b);
  EXPECT_EQ(a->cached_bytes(), 3 * small + large);
  // Everything but one block of the kept class goes; the kept class is not skipped wholesale.
  EXPECT_EQ(a->release_cached(static_cast<std::size_t>(-1), small), 2 * small + large);
  EXPECT_EQ(a->cached_bytes(), small);
  EXPECT_TRUE(a->has_cached(small));
  // Largest first, and only as much as asked.
  Block c1 = a->allocate(4096), c2 = a->allocate(4096);
  a->deallocate(c1), a->deallocate(c2);
  EXPECT_EQ(a->release_cached(1), large);
  EXPECT_EQ(a->cached_bytes(), small + large);
  a->release_all_cached();
  EXPECT_EQ(a->cached_bytes(), 0u);
}

}  // namespace
}  // namespace remat
