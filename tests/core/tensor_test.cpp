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

namespace remat {
namespace {

TEST(Printing, MatchesPyTorchForSmallTensors) {
  // Expected strings are what torch 1.13 prints for the same values.
  EXPECT_EQ(tensor<float>({1, 2, 3}).str(), "tensor([1., 2., 3.])");
  EXPECT_EQ(tensor<float>({0.5f, -1.25f}).str(), "tensor([ 0.5000, -1.2500])");
  EXPECT_EQ(tensor<std::int64_t>({3, -10, 7}).str(), "tensor([  3, -10,   7])");
  EXPECT_EQ(tensor<double>({1, 2}).str(), "tensor([1., 2.], dtype=torch.float64)");
  EXPECT_EQ(tensor<float>({1, 2, 3, 4}, Shape{2, 2}).str(), "tensor([[1., 2.],\n        [3., 4.]])");
  EXPECT_EQ(scalar_tensor(2.5).str(), "tensor(2.5000)");
}

TEST(Printing, SummarisesLargeTensors) {
  std::string s = arange(0, 2000, 1).str();
  EXPECT_EQ(s, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
}

TEST(Printing, ShowsRequiresGrad) {
  Tensor t = ones({2}).set_requires_grad(true);
  EXPECT_EQ(t.str(), "tensor([1., 1.], requires_grad=True)");
}

}  // namespace
}  // namespace remat
