// A caching allocator that takes large segments from a source (cudaMalloc on a GPU) and splits
// them into blocks, in the manner of PyTorch's CUDA caching allocator: requests round up to 512
// bytes; requests up to 1 MiB share 2 MiB segments, requests under 10 MiB take 20 MiB segments,
// larger ones a segment of their size rounded to 2 MiB.  A free block is the smallest one that
// fits (best fit), split when the rest is worth keeping (at least 512 bytes in small segments,
// more than 1 MiB in large ones), and merged with free neighbours when freed.  Only whole free
// segments go back to the source, so freeing costs no driver call on the hot path.
//
// cached_bytes() is what the segments hold beyond the bytes requested by live blocks (free
// blocks and rounding), so the pool's resident + cached is exactly what the source gave.
// Usage: auto a = make_segment_allocator(make_host_segment_source(64 << 20));
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/allocator.h"

namespace remat {

// Where segments come from.  map returns nullptr when the memory is exhausted (the allocator
// then returns its free segments and tries again, and finally reports it with a null block).
class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  virtual Device device() const = 0;
  virtual bool backed() const { return true; }  // as Allocator::backed
  virtual void* map(std::size_t bytes) = 0;
  virtual void unmap(void* p, std::size_t bytes) = 0;
};

// The sizes of the scheme above, exposed for tests and the documentation.
struct SegmentSizes {
  static constexpr std::size_t kRound = 512;
  static constexpr std::size_t kSmallRequest = 1 << 20;  // up to this: the small segments
  static constexpr std::size_t kSmallSegment = 2 << 20;
  static constexpr std::size_t kMediumRequest = 10 << 20;  // under this: a 20 MiB segment
  static constexpr std::size_t kMediumSegment = 20 << 20;
  static constexpr std::size_t kLargeRound = 2 << 20;
};

// The allocator's blocks never come back as a throw for lack of memory: allocate returns a
// null block, and the pool above evicts and retries or reports OutOfBudget.
std::unique_ptr<Allocator> make_segment_allocator(std::unique_ptr<SegmentSource> source);

// Host memory as segments, at most `capacity` bytes mapped at once (to test the allocator,
// its splitting and its out-of-memory path without a GPU).  Without `backed`, segments are
// distinct addresses over no memory, never to be dereferenced (the offline simulator's model
// of a GPU).  Counts its map and unmap calls.
class HostSegmentSource final : public SegmentSource {
 public:
  explicit HostSegmentSource(std::size_t capacity, bool backed = true)
      : capacity_(capacity), backed_(backed) {}
  Device device() const override { return Device::cpu(); }
  bool backed() const override { return backed_; }
  void* map(std::size_t bytes) override;
  void unmap(void* p, std::size_t bytes) override;
  std::size_t mapped_bytes() const { return mapped_; }
  std::size_t maps() const { return maps_; }
  std::size_t unmaps() const { return unmaps_; }

 private:
  std::size_t capacity_;
  bool backed_;
  std::size_t mapped_ = 0, maps_ = 0, unmaps_ = 0;
  std::uintptr_t fake_next_ = std::uintptr_t{1} << 40;
};

}  // namespace remat
