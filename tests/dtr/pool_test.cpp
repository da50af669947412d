// The pool is the only tensor storage: every buffer is a cell, op outputs carry their producer
// record, and resident bytes and their peak are counted exactly.
#include "dtr/pool.h"

#include "support/test_util.h"

namespace remat {
namespace {

using testing::cell_of;

TEST(Pool, EveryTensorIsACellWithItsProducerRecord) {
  Tensor a = tensor<float>({1, 2, 3, 4});
  Tensor b = exp(a);
  Tensor c = add(a, b);
  EXPECT_TRUE(cell_of(a).is_constant());
  ASSERT_FALSE(cell_of(c).is_constant());
  const Record& r = *cell_of(c).record();
  EXPECT_EQ(r.producer->name(), "add");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].get(), &cell_of(a));
  EXPECT_EQ(r.inputs[1].get(), &cell_of(b));
  EXPECT_EQ(r.outputs.at(0).lock().get(), &cell_of(c));
  EXPECT_TRUE(cell_of(b).resident());
  // Factories are zero-input records (replayable); random ones keep their key in the producer.
  Tensor z = randn({3}, {.seed = 4});
  EXPECT_EQ(cell_of(z).record()->producer->name(), "normal");
  EXPECT_TRUE(cell_of(z).record()->inputs.empty());
}

TEST(Pool, ViewsShareTheCellAndAllocateNothing) {
  Pool& pool = Pool::of(Device::cpu());
  Tensor a = zeros({4, 6});
  const auto before = pool.resident_bytes();
  Tensor v = slice(transpose(reshape(a, {6, 4}), 0, 1), 1, 1, 5, 2);
  EXPECT_EQ(pool.resident_bytes(), before);
  EXPECT_TRUE(v.shares_storage_with(a));
  EXPECT_EQ(&cell_of(v), &cell_of(a));
  Tensor c = contiguous(v);
  EXPECT_FALSE(c.shares_storage_with(a));
  EXPECT_EQ(pool.resident_bytes(), before + static_cast<std::size_t>(c.numel()) * 4);
}

TEST(Pool, CountsResidentBytesAndPeakExactly) {
  Pool& pool = Pool::of(Device::cpu());
  const auto base = pool.resident_bytes();
  pool.reset_peak();
  {
    Tensor a = zeros({256});  // 1024 B
    EXPECT_EQ(pool.resident_bytes(), base + 1024);
    Tensor b = add(a, 1.0);  // scalar operand (4 B) lives only during the call
    EXPECT_EQ(pool.resident_bytes(), base + 2048);
    EXPECT_EQ(pool.peak_resident_bytes(), base + 2048 + 4);
    {
      Tensor big = zeros({1000}, {.dtype = DType::Float64});  // 8000 B
      EXPECT_EQ(pool.resident_bytes(), base + 2048 + 8000);
    }
    EXPECT_EQ(pool.resident_bytes(), base + 2048);
    EXPECT_EQ(pool.peak_resident_bytes(), base + 2048 + 8000);
    Tensor i = arange(0, 10);  // int64: 80 B
    EXPECT_EQ(pool.resident_bytes(), base + 2048 + 80);
  }
  EXPECT_EQ(pool.resident_bytes(), base);
  pool.reset_peak();
  EXPECT_EQ(pool.peak_resident_bytes(), base);
}

TEST(Pool, ReleasedIntermediatesKeepTheirRecord) {
  Tensor a = tensor<float>({1, 2});
  Tensor c;
  std::weak_ptr<Cell> b_cell;
  {
    Tensor b = exp(a);
    b_cell = std::static_pointer_cast<Cell>(cell_of(b).shared_from_this());
    c = mul(b, 2.0);
  }
  // b's handles are gone: its buffer is freed but the cell and record remain for c's record.
  auto b = b_cell.lock();
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->resident());
  EXPECT_EQ(b->state(), CellState::Evicted);
  EXPECT_EQ(b->record()->producer->name(), "exp");
  c = Tensor();
  b.reset();
  EXPECT_TRUE(b_cell.expired());
}

}  // namespace
}  // namespace remat
