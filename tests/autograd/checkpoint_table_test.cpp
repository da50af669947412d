// The reference's table (remat-mental-model.md, "What remains resident"): a checkpoint holding
// regions A -> B -> C, where A's backward needs its internal value p and B's backward needs its
// internal value q and its input y.  For each SAVE/RECOMPUTE pair of A and B, the cells resident
// after the forward (by identity, through the pool) and the values the backward recreates (by
// which region bodies ran again, and kernel executions per region) are exactly the reference's.
#include <map>
#include <set>

#include "dtr/pool.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::bit_equal;
using Names = std::set<std::string>;

std::shared_ptr<Cell> cell_of(const Tensor& t) {
  auto& cell = dynamic_cast<Cell&>(*t.storage());
  return std::static_pointer_cast<Cell>(cell.shared_from_this());
}

struct TableRow {
  Names resident;                                       // of x, y, z, p, q, after the forward
  Names recreated;                                      // during the backward
  std::map<std::string, std::size_t> kernels_replayed;  // per region
  Tensor grad;
};

// A: p = exp(x), y = -p           (backward needs p)
// B: q = exp(y), z = q * y        (backward needs q and y)
// C: w = z * z, always RECOMPUTE  (so z is an interior value; its backward needs z)
Tensor abc(const Tensor& x, bool a_recompute, bool b_recompute,
           const std::function<void(const char*, const Tensor&)>& note) {
  Tensor y = region(
      [&](const Tensor& t) {
        Tensor p = exp(t);
        note("p", p);
        Tensor out = neg(p);
        note("y", out);
        return out;
      },
      "A", a_recompute)(x);
  Tensor z = region(
      [&](const Tensor& t) {
        Tensor q = exp(t);
        note("q", q);
        Tensor out = mul(q, t);
        note("z", out);
        return out;
      },
      "B", b_recompute)(y);
  return region([](const Tensor& t) { return mul(t, t); }, "C", true)(z);
}

Tensor input_leaf() {
  return tensor<double>({0.25, -0.5, 0.75, -1.0, 0.125, 0.5}, Shape{2, 3}, true);
}

TableRow run(bool a_recompute, bool b_recompute) {
  Pool::of(Device::cpu()).configure(DtrConfig{});
  reset_checkpoint_report();
  TableRow row;
  std::map<std::string, std::shared_ptr<Cell>> cells;
  auto note = [&](const char* name, const Tensor& t) {
    if (is_recomputing())
      row.recreated.insert(name);
    else
      cells[name] = cell_of(t);
  };
  Tensor x0 = input_leaf();
  Tensor w;
  {
    Tensor x = mul(x0, x0);  // an op output, so the pool frees it once nobody holds it
    cells["x"] = cell_of(x);
    w = checkpoint([&](const Tensor& in) { return abc(in, a_recompute, b_recompute, note); }, x,
                   {.name = "abc"});
  }
  for (const auto& [name, cell] : cells)
    if (cell->resident()) row.resident.insert(name);
  backward(sum(w));
  for (const char* r : {"A", "B", "C"}) {
    const RegionReport* rep = checkpoint_report().find("abc", r);
    row.kernels_replayed[r] = rep ? rep->kernels_replayed : 0;
  }
  row.grad = x0.grad();
  return row;
}

Tensor plain_grad() {
  Tensor x0 = input_leaf();
  backward(sum(abc(mul(x0, x0), false, false, [](const char*, const Tensor&) {})));
  return x0.grad();
}

using Kernels = std::map<std::string, std::size_t>;

TEST(CheckpointTable, SaveSave) {
  TableRow row = run(false, false);
  EXPECT_EQ(row.resident, (Names{"y", "z", "p", "q"}));
  EXPECT_EQ(row.recreated, Names{});
  EXPECT_EQ(row.kernels_replayed, (Kernels{{"A", 0}, {"B", 0}, {"C", 0}}));
  EXPECT_EQ(checkpoint_report().replays, 0u);
  EXPECT_TRUE(bit_equal(row.grad, plain_grad()));
}

TEST(CheckpointTable, SaveRecompute) {
  TableRow row = run(false, true);
  EXPECT_EQ(row.resident, (Names{"y", "p"}));
  EXPECT_EQ(row.recreated, (Names{"z", "q"}));
  // B: exp, mul; C: mul.
  EXPECT_EQ(row.kernels_replayed, (Kernels{{"A", 0}, {"B", 2}, {"C", 1}}));
  EXPECT_EQ(checkpoint_report().replays, 1u);
  EXPECT_TRUE(bit_equal(row.grad, plain_grad()));
}

TEST(CheckpointTable, RecomputeSave) {
  TableRow row = run(true, false);
  EXPECT_EQ(row.resident, (Names{"x", "z", "q"}));
  EXPECT_EQ(row.recreated, (Names{"y", "p"}));
  EXPECT_EQ(row.kernels_replayed, (Kernels{{"A", 2}, {"B", 0}, {"C", 1}}));
  EXPECT_EQ(checkpoint_report().replays, 1u);
  EXPECT_TRUE(bit_equal(row.grad, plain_grad()));
}

TEST(CheckpointTable, RecomputeRecompute) {
  TableRow row = run(true, true);
  EXPECT_EQ(row.resident, (Names{"x"}));
  EXPECT_EQ(row.recreated, (Names{"y", "z", "p", "q"}));
  EXPECT_EQ(row.kernels_replayed, (Kernels{{"A", 2}, {"B", 2}, {"C", 1}}));
  EXPECT_EQ(checkpoint_report().replays, 1u);
  EXPECT_TRUE(bit_equal(row.grad, plain_grad()));
}

// Without the checkpoint every one of them stays for the backward: the table's rows are the
// checkpoint's doing.
TEST(CheckpointTable, WithoutCheckpointEverythingStays) {
  Pool::of(Device::cpu()).configure(DtrConfig{});
  std::map<std::string, std::shared_ptr<Cell>> cells;
  Tensor x0 = input_leaf();
  Tensor w;
  {
    Tensor x = mul(x0, x0);
    cells["x"] = cell_of(x);
    w = abc(x, true, true, [&](const char* name, const Tensor& t) { cells[name] = cell_of(t); });
  }
  Names resident;
  for (const auto& [name, cell] : cells)
    if (cell->resident()) resident.insert(name);
  // x: neither its producer nor exp saves it; the rest are saved by their consumers.
  EXPECT_EQ(resident, (Names{"y", "z", "p", "q"}));
}

}  // namespace
}  // namespace remat
