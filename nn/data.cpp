#include "nn/data.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/random.h"
#include "dtr/pool.h"
#include "nn/transforms.h"
#include "ops/factory.h"
#include "ops/index.h"
#include "ops/view.h"

namespace remat::nn {

namespace detail {

Tensor constant_filled_impl(const TensorMeta& m, void (*fill)(void*, void*), void* ctx) {
  REMAT_CHECK(m.device.is_cpu(), "constant_filled: device {} not supported", m.device);
  TensorMeta meta = TensorMeta::contiguous(m.shape, m.dtype, m.device);
  Pool& pool = Pool::of(meta.device);
  auto cell = pool.new_constant(meta.nbytes(), "data");
  if (meta.nbytes() > 0) fill(ctx, cell->buffer());
  auto impl = std::make_shared<TensorImpl>();
  impl->meta = std::move(meta);
  impl->storage = pool.handle(cell);
  return Tensor(std::move(impl));
}

std::byte* raw_bytes(const Tensor& t) {
  switch (t.dtype()) {
    case DType::Float32:
      return reinterpret_cast<std::byte*>(t.data_ptr<float>());
    case DType::Float64:
      return reinterpret_cast<std::byte*>(t.data_ptr<double>());
    case DType::Int64:
      return reinterpret_cast<std::byte*>(t.data_ptr<std::int64_t>());
  }
  REMAT_THROW("unknown dtype");
}

std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t salt) {
  std::uint64_t z = seed ^ (salt * 0x9E3779B97F4A7C15ull);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace detail

namespace {

constexpr std::uint64_t kShuffleSalt = 0x5348554646ull;  // "SHUFF"

// Example fields stacked along a new first dim by copying their bytes into one constant.
Tensor stack_field(const char* field, const std::vector<Tensor>& parts,
                   std::span<const std::int64_t> indices) {
  const Tensor& first = parts.front();
  for (std::size_t i = 0; i < parts.size(); ++i) {
    REMAT_CHECK(parts[i].defined(), "Dataset::get_batch: example {} has an undefined {}",
                indices[i], field);
    REMAT_CHECK(parts[i].shape() == first.shape() && parts[i].dtype() == first.dtype(),
                "Dataset::get_batch: example {} has {} of shape {} ({}) but example {} has shape "
                "{} ({}); a batch needs equal shapes",
                indices[i], field, parts[i].shape(), parts[i].dtype(), indices[0], first.shape(),
                first.dtype());
    REMAT_CHECK(parts[i].device().is_cpu(), "Dataset::get_batch: example {} is on {}", indices[i],
                parts[i].device());
  }
  std::vector<Tensor> dense;
  dense.reserve(parts.size());
  for (const auto& p : parts) dense.push_back(contiguous(p));
  Shape shape{static_cast<std::int64_t>(parts.size())};
  shape.insert(shape.end(), first.shape().begin(), first.shape().end());
  const std::size_t row = first.meta().nbytes();
  return detail::constant_filled(TensorMeta::contiguous(shape, first.dtype(), Device::cpu()),
                                 [&](void* out) {
                                   auto* dst = static_cast<std::byte*>(out);
                                   for (std::size_t i = 0; i < dense.size(); ++i)
                                     std::memcpy(dst + i * row, detail::raw_bytes(dense[i]), row);
                                 });
}

void check_index(const char* what, std::int64_t index, std::int64_t size) {
  REMAT_CHECK(index >= 0 && index < size,
              "{}: index {} is out of range for a dataset of {} examples", what, index, size);
}

}  // namespace

Batch Dataset::get_batch(std::span<const std::int64_t> indices) const {
  REMAT_CHECK(!indices.empty(), "Dataset::get_batch: no indices given");
  std::vector<Tensor> inputs, targets;
  inputs.reserve(indices.size());
  targets.reserve(indices.size());
  for (const std::int64_t i : indices) {
    check_index("Dataset::get_batch", i, size());
    Example e = get(i);
    inputs.push_back(std::move(e.input));
    targets.push_back(std::move(e.target));
  }
  return {stack_field("input", inputs, indices), stack_field("target", targets, indices)};
}

TensorDataset::TensorDataset(Tensor inputs, Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  REMAT_CHECK(inputs_.defined() && targets_.defined(),
              "TensorDataset: inputs and targets must be defined tensors");
  REMAT_CHECK(inputs_.dim() >= 1 && targets_.dim() >= 1,
              "TensorDataset: inputs (shape {}) and targets (shape {}) need a first dim that "
              "indexes examples",
              inputs_.shape(), targets_.shape());
  REMAT_CHECK(inputs_.size(0) == targets_.size(0),
              "TensorDataset: inputs of shape {} and targets of shape {} hold different numbers "
              "of examples ({} vs {})",
              inputs_.shape(), targets_.shape(), inputs_.size(0), targets_.size(0));
  REMAT_CHECK(inputs_.device() == targets_.device(),
              "TensorDataset: inputs on {} and targets on {}", inputs_.device(), targets_.device());
}

Example TensorDataset::get(std::int64_t index) const {
  check_index("TensorDataset::get", index, size());
  return {select(inputs_, 0, index), select(targets_, 0, index)};
}

Batch TensorDataset::get_batch(std::span<const std::int64_t> indices) const {
  for (const std::int64_t i : indices) check_index("TensorDataset::get_batch", i, size());
  const Tensor idx =
      tensor<std::int64_t>(std::vector<std::int64_t>(indices.begin(), indices.end()));
  return {index_select(inputs_, 0, idx), index_select(targets_, 0, idx)};
}

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<std::int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  REMAT_CHECK(base_ != nullptr, "Subset: the base dataset is null");
  const std::int64_t n = base_->size();
  for (const std::int64_t i : indices_) check_index("Subset", i, n);
}

Subset Subset::first(std::shared_ptr<const Dataset> base, std::int64_t n) {
  REMAT_CHECK(base != nullptr, "Subset::first: the base dataset is null");
  REMAT_CHECK(n >= 0, "Subset::first: count must be non-negative, got {}", n);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(std::min(n, base->size())));
  std::iota(idx.begin(), idx.end(), std::int64_t{0});
  return Subset(std::move(base), std::move(idx));
}

Example Subset::get(std::int64_t index) const {
  check_index("Subset::get", index, size());
  return base_->get(indices_[static_cast<std::size_t>(index)]);
}

Batch Subset::get_batch(std::span<const std::int64_t> indices) const {
  std::vector<std::int64_t> mapped;
  mapped.reserve(indices.size());
  for (const std::int64_t i : indices) {
    check_index("Subset::get_batch", i, size());
    mapped.push_back(indices_[static_cast<std::size_t>(i)]);
  }
  return base_->get_batch(mapped);
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  REMAT_CHECK(dataset_ != nullptr, "DataLoader: the dataset is null");
  REMAT_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be at least 1, got {}",
              options_.batch_size);
  REMAT_CHECK(options_.world_size >= 1, "DataLoader: world_size must be at least 1, got {}",
              options_.world_size);
  REMAT_CHECK(options_.rank >= 0 && options_.rank < options_.world_size,
              "DataLoader: rank {} is out of range for world_size {}", options_.rank,
              options_.world_size);
}

std::int64_t DataLoader::num_batches() const {
  const std::int64_t n = dataset_->size(), g = global_batch_size();
  if (options_.drop_last) return n / g;
  // A short last global batch counts only if every rank gets an example of it.
  return n / g + (n % g >= options_.world_size ? 1 : 0);
}

std::vector<std::int64_t> DataLoader::order(std::uint64_t epoch) const {
  std::vector<std::int64_t> o(static_cast<std::size_t>(dataset_->size()));
  std::iota(o.begin(), o.end(), std::int64_t{0});
  if (!options_.shuffle) return o;
  // Fisher-Yates; draw i is a pure function of (seed, epoch, i).  j = r mod (i + 1) of a 64-bit
  // r: the modulo bias is below (i + 1) / 2^64, far under anything measurable.
  const RngKey key{detail::mix_seed(options_.seed, kShuffleSalt), epoch};
  for (std::size_t i = o.size(); i-- > 1;) {
    const auto bits = philox4x32(key, i);
    const std::uint64_t r = static_cast<std::uint64_t>(bits[0]) << 32 | bits[1];
    std::swap(o[i], o[static_cast<std::size_t>(r % (i + 1))]);
  }
  return o;
}

Batch DataLoader::make_batch(const std::vector<std::int64_t>& order, std::uint64_t epoch,
                             std::int64_t index) const {
  const std::int64_t nb = num_batches();
  REMAT_CHECK(index >= 0 && index < nb, "DataLoader: batch {} is out of range (epoch has {})",
              index, nb);
  const std::int64_t n = static_cast<std::int64_t>(order.size());
  const std::int64_t ranks = options_.world_size, rank = options_.rank;
  const std::int64_t global_start = index * global_batch_size();
  const std::int64_t global_size = std::min(global_batch_size(), n - global_start);
  // Rank r's share: batch_size examples of a full global batch, or an even split of a short one.
  const std::int64_t share = global_size / ranks, extra = global_size % ranks;
  const std::int64_t start = global_start + rank * share + std::min(rank, extra);
  const std::int64_t size = share + (rank < extra ? 1 : 0);
  Batch b = dataset_->get_batch(std::span<const std::int64_t>(order).subspan(
      static_cast<std::size_t>(start), static_cast<std::size_t>(size)));
  if (options_.transform) {
    const auto call = (epoch * static_cast<std::uint64_t>(nb) + static_cast<std::uint64_t>(index)) *
                          static_cast<std::uint64_t>(ranks) +
                      static_cast<std::uint64_t>(rank);
    b.inputs = options_.transform->apply(b.inputs, call);
  }
  return b;
}

Batch DataLoader::batch(std::uint64_t epoch, std::int64_t index) const {
  return make_batch(order(epoch), epoch, index);
}

DataLoader::Iterator DataLoader::begin() {
  const std::uint64_t epoch = next_epoch_++;
  return Iterator(this, std::make_shared<const std::vector<std::int64_t>>(order(epoch)), epoch, 0);
}

DataLoader::Iterator DataLoader::end() const {
  return Iterator(this, nullptr, 0, num_batches());
}

const Batch& DataLoader::Iterator::operator*() const {
  REMAT_CHECK(loader_ != nullptr && order_ != nullptr && batch_ < loader_->num_batches(),
              "DataLoader: dereferencing an iterator that is past the end of its epoch");
  if (!current_) current_ = loader_->make_batch(*order_, epoch_, batch_);
  return *current_;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++batch_;
  current_.reset();
  return *this;
}

}  // namespace remat::nn
