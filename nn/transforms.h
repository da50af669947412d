// Batch transforms for image data [B, C, H, W]: Normalize, RandomCrop (zero padding),
// RandomHorizontalFlip and Compose.  A transform is a pure function of (batch, call index); the
// random ones draw per example from Philox keyed by (their seed, the call index).
// Usage: Compose aug({std::make_shared<RandomCrop>(32, 4, /*seed=*/1),
//                     std::make_shared<RandomHorizontalFlip>(0.5, /*seed=*/2)});
//        Tensor x = aug(batch);  // or aug.apply(batch, call_index); DataLoader does the latter
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace remat::nn {

class Transform {
 public:
  virtual ~Transform() = default;
  // Deterministic: the same batch and call index always give the same result.
  virtual Tensor apply(const Tensor& batch, std::uint64_t call) const = 0;
  // Applies with this object's own counter as call index (0, 1, 2, ...).
  Tensor operator()(const Tensor& batch) { return apply(batch, calls_++); }
  std::uint64_t calls() const { return calls_; }

 private:
  std::uint64_t calls_ = 0;
};

// (x - mean[c]) / std[c] for channel c = dim 1 of a floating batch [B, C, ...], computed in
// the batch's dtype with the same rounding as those two operations.
class Normalize : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor apply(const Tensor& batch, std::uint64_t call) const override;

 private:
  std::vector<double> mean_, std_;
};

// Pads H and W (the last two dims of [B, ..., H, W]) with `padding` zeros on every side and
// cuts a size x size window at a random position, drawn independently for each example
// uniformly among the (H + 2p - size + 1) * (W + 2p - size + 1) positions.  Runs as an op whose
// record holds its key, so a replay after eviction redraws the same windows.
class RandomCrop : public Transform {
 public:
  explicit RandomCrop(std::int64_t size, std::int64_t padding = 0, std::uint64_t seed = 0);
  Tensor apply(const Tensor& batch, std::uint64_t call) const override;
  // The window's top-left corner {row, col} in padded coordinates for example `sample` of call
  // `call`, for an input of height h and width w.
  std::array<std::int64_t, 2> offset(std::uint64_t call, std::int64_t sample, std::int64_t h,
                                     std::int64_t w) const;

 private:
  std::int64_t size_, padding_;
  std::uint64_t seed_;
};

// Mirrors the last dim of [B, ..., W] for each example independently with probability p.
class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5, std::uint64_t seed = 0);
  Tensor apply(const Tensor& batch, std::uint64_t call) const override;
  bool flips(std::uint64_t call, std::int64_t sample) const;

 private:
  double p_;
  std::uint64_t seed_;
};

// Applies its transforms in order, all with the same call index (each random one has its own
// seed, and its draws are salted by its kind, so they stay independent).
class Compose : public Transform {
 public:
  explicit Compose(std::vector<std::shared_ptr<const Transform>> transforms);
  Tensor apply(const Tensor& batch, std::uint64_t call) const override;

 private:
  std::vector<std::shared_ptr<const Transform>> transforms_;
};

}  // namespace remat::nn
