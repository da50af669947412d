// The time cost model's estimate: the fastest run seen of an op in the same size class, so one
// slow measurement does not make a cheap op look expensive to the heuristics, and a table that
// stays small when shapes vary; and the price of a rebuild, the median of the last ones.
#include "dtr/kernel_times.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "dtr/pool.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "support/test_util.h"

namespace remat {
namespace {

class NamedProducer final : public Producer {
 public:
  explicit NamedProducer(std::string name) : name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  void execute(std::span<const KernelArg>, std::span<const KernelArg>) const override {}

 private:
  std::string name_;
};

Record record_of(const std::shared_ptr<const Producer>& p, Shape shape) {
  Record r;
  r.producer = p;
  r.input_metas = {TensorMeta::contiguous(shape, DType::Float32, Device::cpu())};
  r.output_metas = {r.input_metas[0]};
  r.flops = static_cast<double>(shape_numel(shape));
  r.bytes = 2.0 * static_cast<double>(r.input_metas[0].nbytes());
  return r;
}

TEST(KernelTimes, EstimateIsTheFastestRunOfTheSameOpAndSizeClass) {
  KernelTimes times;
  auto relu = std::make_shared<NamedProducer>("relu");
  auto tanh = std::make_shared<NamedProducer>("tanh");
  EXPECT_DOUBLE_EQ(times.observe(record_of(relu, {64, 64}), 8e-3), 8e-3);
  EXPECT_DOUBLE_EQ(times.observe(record_of(relu, {64, 64}), 1e-3), 1e-3);
  EXPECT_DOUBLE_EQ(times.observe(record_of(relu, {64, 64}), 5e-3), 1e-3);  // a slow outlier
  // Another shape or another op is another entry.
  EXPECT_DOUBLE_EQ(times.observe(record_of(relu, {64, 32}), 4e-3), 4e-3);
  EXPECT_DOUBLE_EQ(times.observe(record_of(tanh, {64, 64}), 6e-3), 6e-3);
  EXPECT_EQ(times.size(), 3u);
}

TEST(KernelTimes, RebuildsArePricedByTheMedianOfTheLastOnes) {
  KernelTimes times;
  auto relu = std::make_shared<NamedProducer>("relu");
  const Record r = record_of(relu, {64, 64});
  EXPECT_DOUBLE_EQ(times.observe(r, 1e-3), 1e-3);
  // A rebuild reads inputs out of the cache: slower than the original call.
  EXPECT_DOUBLE_EQ(times.observe_rematerialization(r, 3e-3), 3e-3);
  // Records still cost the fastest run (the heuristics' price), rebuilds included.
  EXPECT_DOUBLE_EQ(times.observe(r, 1.2e-3), 1e-3);
  EXPECT_DOUBLE_EQ(times.observe_rematerialization(r, 2e-3), 2e-3);  // the lower of two
  // The median moves to 2.5e-3, within 1.25x of the price: the price stays.
  EXPECT_DOUBLE_EQ(times.observe_rematerialization(r, 2.5e-3), 2e-3);
  // One slow outlier moves the median one place, not to the outlier.
  EXPECT_DOUBLE_EQ(times.observe_rematerialization(r, 50e-3), 2e-3);
  // Only the last kRematRuns count: eight faster rebuilds replace every older one.
  double price = 0;
  for (std::size_t i = 0; i < KernelTimes::kRematRuns; ++i)
    price = times.observe_rematerialization(r, 0.5e-3);
  EXPECT_DOUBLE_EQ(price, 0.5e-3);
  EXPECT_DOUBLE_EQ(times.observe_rematerialization(r, 0.6e-3), 0.5e-3);
  EXPECT_DOUBLE_EQ(times.observe(r, 0.9e-3), 0.5e-3);  // a rebuild was the fastest run
  // Another size class keeps its own.
  EXPECT_DOUBLE_EQ(times.observe(record_of(relu, {64, 32}), 0.7e-3), 0.7e-3);
  EXPECT_EQ(times.size(), 2u);
}

TEST(KernelTimes, ShapesThatVaryStayInTheirSizeClass) {
  KernelTimes times;
  auto cell = std::make_shared<NamedProducer>("tree_cell");
  // Every width from 33 to 64 columns: two size classes (up to 32 Ki and from 32 Ki bytes moved).
  for (std::int64_t w = 33; w <= 64; ++w) times.observe(record_of(cell, {64, w}), 1e-3);
  EXPECT_EQ(times.size(), 2u);
}

TEST(KernelTimes, RecordsOfTheTimeCostModelCarryTheEstimate) {
  // Only under a budget: unbudgeted, nothing is scored and records keep their measured time.
  Pool& pool = Pool::of(Device::cpu());
  pool.set_budget(std::size_t{1} << 40);
  struct Restore {
    Pool& pool;
    ~Restore() { pool.set_budget(std::nullopt); }
  } restore{pool};
  Tensor x = randn({256, 256}, {.seed = 3});
  Tensor a = relu(x), b = relu(x);
  const auto& ra = *static_cast<Cell&>(*a.storage()).record();
  const auto& rb = *static_cast<Cell&>(*b.storage()).record();
  EXPECT_GT(ra.time_cost, 0);
  EXPECT_LE(ra.time_cost, ra.seconds);
  EXPECT_LE(rb.time_cost, std::min(ra.seconds, rb.seconds));
  EXPECT_DOUBLE_EQ(rb.cost(CostModel::Time), rb.time_cost);
  EXPECT_TRUE(ra.time_cost_estimated);
  // A rebuild, however slow, leaves the records' price at the fastest run.
  pool.evict(testing::cell_of(a));
  Tensor e = exp(a);  // rebuilds a
  Tensor d = relu(x);
  const auto& rd = *static_cast<Cell&>(*d.storage()).record();
  EXPECT_LE(rd.time_cost, std::min({ra.seconds, rb.seconds, rd.seconds}));
  pool.set_budget(std::nullopt);
  Tensor c = relu(x);
  const auto& rc = *static_cast<Cell&>(*c.storage()).record();
  EXPECT_EQ(rc.time_cost, 0);
  EXPECT_DOUBLE_EQ(rc.cost(CostModel::Time), rc.seconds);
}

}  // namespace
}  // namespace remat
