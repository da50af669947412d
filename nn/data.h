// Datasets and the DataLoader: indexable examples, batched with one copy per batch, shuffled
// reproducibly (a Philox key from the seed and the epoch), with an optional batch transform.
// Usage: DataLoader loader(TensorDataset(x, y), {.batch_size = 64, .shuffle = true, .seed = 1});
//        for (const Batch& b : loader) { auto loss = cross_entropy(model(b.inputs), b.targets); }
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "core/tensor.h"

namespace remat::nn {

class Transform;  // nn/transforms.h

struct Example {
  Tensor input;
  Tensor target;
};

// inputs [B, ...], targets [B, ...] (for classification: int64 [B]).
struct Batch {
  Tensor inputs;
  Tensor targets;
  std::int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  // Example `index` in [0, size()); out of range is an error.
  virtual Example get(std::int64_t index) const = 0;
  // The examples at `indices`, stacked along a new first dim.  This default copies each
  // example's bytes into one new constant tensor per field (no per-example op calls); datasets
  // that hold their data in tensors override it with one indexed copy.
  virtual Batch get_batch(std::span<const std::int64_t> indices) const;
};

// Examples are the rows (first dim) of `inputs` and `targets`, which must have equal sizes.
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor inputs, Tensor targets);
  std::int64_t size() const override { return inputs_.size(0); }
  // Views of row `index` (no copy).
  Example get(std::int64_t index) const override;
  // One index_select per field: a contiguous copy of the chosen rows, recorded as an op on the
  // dataset tensor, so under a budget the batch can be evicted and recomputed from it.
  Batch get_batch(std::span<const std::int64_t> indices) const override;
  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor inputs_;
  Tensor targets_;
};

// A view of some examples of another dataset, in the given order (repeats allowed).
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, std::vector<std::int64_t> indices);
  // The first n examples of `base` (all of them when n >= base->size()).
  static Subset first(std::shared_ptr<const Dataset> base, std::int64_t n);
  std::int64_t size() const override { return static_cast<std::int64_t>(indices_.size()); }
  Example get(std::int64_t index) const override;
  Batch get_batch(std::span<const std::int64_t> indices) const override;
  const std::vector<std::int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<std::int64_t> indices_;
};

struct DataLoaderOptions {
  std::int64_t batch_size = 1;
  bool shuffle = false;
  // Without drop_last the last batch holds the remaining size() % batch_size examples.
  bool drop_last = false;
  // Shuffling draws from philox4x32 keyed by (seed, epoch): the same seed gives the same order
  // for each epoch, and each epoch a different one.
  std::uint64_t seed = 0;
  // Applied to each batch's inputs with call index (epoch * num_batches() + batch index) *
  // world_size + rank, so a run (or a resumed one, via set_epoch) sees the same augmentation
  // and no two ranks draw the same.
  std::shared_ptr<const Transform> transform = nullptr;
  // Data-parallel sharding (as PyTorch's DistributedSampler): every rank draws the order one
  // process would, in global batches of world_size * batch_size examples, and rank r takes
  // examples [r * batch_size, (r + 1) * batch_size) of each, so world_size ranks at batch_size
  // see what one process sees at world_size * batch_size.  A last, short global batch (without
  // drop_last) is split as evenly as possible, the first ranks taking one more; when it holds
  // fewer examples than ranks it is dropped, so no rank gets an empty batch.
  std::int64_t world_size = 1;
  std::int64_t rank = 0;
};

class DataLoader {
 public:
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = const Batch*;
    using reference = const Batch&;

    Iterator() = default;
    // The batch is built on first access and kept until the iterator advances.
    const Batch& operator*() const;
    const Batch* operator->() const { return &**this; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.batch_ == b.batch_; }

   private:
    friend class DataLoader;
    Iterator(const DataLoader* loader, std::shared_ptr<const std::vector<std::int64_t>> order,
             std::uint64_t epoch, std::int64_t batch)
        : loader_(loader), order_(std::move(order)), epoch_(epoch), batch_(batch) {}
    const DataLoader* loader_ = nullptr;
    std::shared_ptr<const std::vector<std::int64_t>> order_;
    std::uint64_t epoch_ = 0;
    std::int64_t batch_ = 0;
    mutable std::optional<Batch> current_;
  };

  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  template <class D>
  requires std::derived_from<D, Dataset> DataLoader(D dataset, DataLoaderOptions options = {})
      : DataLoader(std::make_shared<const D>(std::move(dataset)), std::move(options)) {}

  // Each begin() starts the next epoch (0, 1, 2, ...); end() marks its end.
  Iterator begin();
  Iterator end() const;

  std::int64_t num_batches() const;
  // The epoch the next begin() starts; set_epoch resumes a run at a given epoch.
  std::uint64_t next_epoch() const { return next_epoch_; }
  void set_epoch(std::uint64_t epoch) { next_epoch_ = epoch; }
  // The example order of an epoch: a permutation of [0, size()) when shuffling, else identity;
  // the same on every rank.
  std::vector<std::int64_t> order(std::uint64_t epoch) const;
  // Batch `index` of `epoch`, transform included: what iterating that epoch yields (this
  // rank's share of global batch `index`).
  Batch batch(std::uint64_t epoch, std::int64_t index) const;

  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  Batch make_batch(const std::vector<std::int64_t>& order, std::uint64_t epoch,
                   std::int64_t index) const;
  std::int64_t global_batch_size() const { return options_.batch_size * options_.world_size; }
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::uint64_t next_epoch_ = 0;
};

namespace detail {
// The first byte of a contiguous CPU tensor, valid until the next op call (for a constant, for
// good: constants never move).
std::byte* raw_bytes(const Tensor& t);
// A new constant CPU tensor of `meta` (contiguous) whose bytes `fill` writes in place: data
// enters the pool with one copy.  If fill throws, nothing is kept.
Tensor constant_filled_impl(const TensorMeta& meta, void (*fill)(void*, void*), void* ctx);
template <class Fill>
Tensor constant_filled(const TensorMeta& meta, Fill&& fill) {
  return constant_filled_impl(
      meta,
      [](void* ctx, void* data) { (*static_cast<std::remove_reference_t<Fill>*>(ctx))(data); },
      &fill);
}
// A salt-mixed 64-bit seed (splitmix64), so streams drawn for different purposes from the same
// user seed are unrelated.
std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t salt);
}  // namespace detail

}  // namespace remat::nn
