#include "support/test_util.h"

namespace remat {
namespace {

TEST(Tensor, FromVectorHasShapeStridesAndValues) {
  Tensor t = tensor<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.at<float>({1, 2}), 6.0f);
  EXPECT_EQ(t.at<float>({-1, 0}), 4.0f);
}

TEST(Tensor, ElementAccessOutOfRangeNamesTheShape) {
  Tensor t = zeros({2, 3});
  try {
    t.at<float>({2, 0});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat
