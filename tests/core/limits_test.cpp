// Limits on values from outside the program: thread counts the OpenMP runtime can serve, and
// shapes from files whose strides and sizes fit in 64 bits.
#include <limits>
#include <thread>

#include "core/parallel.h"
#include "core/shape.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::throws_with;

TEST(Threads, CountsBeyondAFewPerHardwareThreadAreErrors) {
  const int saved = num_threads();
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(max_threads(), 4 * hw);
  EXPECT_TRUE(throws_with([] { set_num_threads(100000); },
                          {"set_num_threads", "100000", "hardware threads"}));
  EXPECT_TRUE(throws_with([] { set_num_threads(0); }, {"set_num_threads", "got 0"}));
  EXPECT_EQ(num_threads(), saved);  // a refused count changes nothing
  set_num_threads(max_threads());
  EXPECT_EQ(num_threads(), max_threads());
  set_num_threads(saved);
}

TEST(Shapes, FromFilesMustHave64BitStrides) {
  EXPECT_TRUE(shape_fits({}));
  EXPECT_TRUE(shape_fits({0, 3}));
  EXPECT_TRUE(shape_fits({std::int64_t{1} << 30, std::int64_t{1} << 29}));
  EXPECT_FALSE(shape_fits({-1}));
  // 0 elements, but the strides of the zero dimension's neighbours overflow.
  EXPECT_FALSE(shape_fits({0, std::int64_t{1} << 62}));
  EXPECT_FALSE(shape_fits({std::int64_t{1} << 31, std::int64_t{1} << 31, 4}));
  EXPECT_FALSE(shape_fits({std::numeric_limits<std::int64_t>::max()}));
}

}  // namespace
}  // namespace remat
