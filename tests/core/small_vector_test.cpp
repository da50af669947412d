// SmallVector: inline up to N, on the heap past it, with element lifetimes exact in both (shared
// pointers count the live copies, so a leak or a double destroy shows in the use counts).
#include "core/small_vector.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace remat {
namespace {

using Vec = SmallVector<std::shared_ptr<int>, 2>;

TEST(SmallVector, GrowsPastItsInlineCapacityKeepingOrder) {
  auto v0 = std::make_shared<int>(0);
  Vec v;
  for (int i = 0; i < 5; ++i) v.push_back(std::make_shared<int>(i));
  v.push_back(v0);
  ASSERT_EQ(v.size(), 6u);
  EXPECT_GE(v.capacity(), 6u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*v[i], i);
  EXPECT_EQ(v0.use_count(), 2);
  v.clear();
  EXPECT_EQ(v0.use_count(), 1);
  EXPECT_TRUE(v.empty());
}

TEST(SmallVector, MovesStealTheHeapAndMoveInlineElements) {
  auto p = std::make_shared<int>(7);
  for (std::size_t n : {1u, 2u, 3u, 9u}) {  // inline and heap-backed sources
    Vec a;
    for (std::size_t i = 0; i < n; ++i) a.push_back(p);
    Vec b(std::move(a));
    EXPECT_EQ(b.size(), n);
    EXPECT_TRUE(a.empty());  // NOLINT: moved-from is empty by contract
    EXPECT_EQ(p.use_count(), static_cast<long>(n) + 1);
    Vec c;
    c.push_back(std::make_shared<int>(1));
    c = std::move(b);
    EXPECT_EQ(c.size(), n);
    EXPECT_EQ(p.use_count(), static_cast<long>(n) + 1);
    Vec d = c;  // copy
    EXPECT_EQ(p.use_count(), 2 * static_cast<long>(n) + 1);
    d = d;  // self-assignment keeps it whole
    EXPECT_EQ(d.size(), n);
  }
  EXPECT_EQ(p.use_count(), 1);
}

TEST(SmallVector, EraseIfResizeAssignAndAt) {
  SmallVector<std::string, 2> v{"a", "bb", "c", "dd", "e"};
  v.erase_if([](const std::string& s) { return s.size() == 2; });
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0] + v[1] + v[2], "ace");
  v.resize(5);
  EXPECT_EQ(v.size(), 5u);
  EXPECT_TRUE(v.back().empty());
  v.resize(1);
  EXPECT_EQ(v.size(), 1u);
  const std::string more[] = {"x", "y", "z"};
  v.assign(std::begin(more), std::end(more));
  EXPECT_EQ(v.at(2), "z");
  EXPECT_THROW((void)v.at(3), std::out_of_range);
  std::span<const std::string> s = v;
  EXPECT_EQ(s.size(), 3u);
}

// The argument refers to an element of the full vector itself: it must be copied before the
// old buffer is released (under ASan a wrong order is a heap-use-after-free).
TEST(SmallVector, PushingItsOwnElementAtFullCapacityCopiesItFirst) {
  SmallVector<std::string, 2> v{std::string(40, 'a'), "b"};
  for (int i = 0; i < 6; ++i) v.push_back(v[0]);
  ASSERT_EQ(v.size(), 8u);
  for (std::size_t i = 2; i < v.size(); ++i) EXPECT_EQ(v[i], std::string(40, 'a'));
  EXPECT_EQ(v[1], "b");
}

}  // namespace
}  // namespace remat
