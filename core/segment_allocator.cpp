#include "core/segment_allocator.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <set>
#include <unordered_map>

#include "core/error.h"

namespace remat {
namespace {

using S = SegmentSizes;

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

// One block of a segment; the blocks of a segment form an address-ordered list.
struct Node {
  char* ptr = nullptr;
  std::size_t size = 0;
  std::size_t requested = 0;  // of a live block: the bytes asked for
  bool live = false;
  bool small = false;  // in a small segment
  Node* prev = nullptr;
  Node* next = nullptr;
};

struct BySizeThenAddress {
  bool operator()(const Node* a, const Node* b) const {
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};
using FreeSet = std::set<Node*, BySizeThenAddress>;

class SegmentAllocator final : public Allocator {
 public:
  explicit SegmentAllocator(std::unique_ptr<SegmentSource> source) : source_(std::move(source)) {}
  ~SegmentAllocator() override {
    release_all_cached();
    // Live blocks at destruction belong to cells that outlive the allocator; leave them mapped.
  }
  Device device() const override { return source_->device(); }
  bool backed() const override { return source_->backed(); }

  std::size_t size_class(std::size_t bytes) const override {
    return round_up(bytes ? bytes : 1, S::kRound);
  }

  Block allocate(std::size_t bytes) override {
    const std::size_t size = size_class(bytes);
    std::lock_guard lock(mu_);
    Node* n = best_fit(size);
    if (!n) n = new_segment(size);
    if (!n) {
      release_locked(static_cast<std::size_t>(-1), 0);
      n = new_segment(size);
    }
    if (!n) return {};
    free_of(n->small).erase(n);
    split(n, size);
    n->live = true;
    n->requested = bytes;
    in_use_ += bytes;
    live_.emplace(n->ptr, n);
    return {n->ptr, n->size};
  }

  void deallocate(Block block) override {
    if (!block.ptr) return;
    std::lock_guard lock(mu_);
    auto it = live_.find(block.ptr);
    REMAT_CHECK(it != live_.end(), "segment allocator: {} is not a live block", block.ptr);
    Node* n = it->second;
    live_.erase(it);
    in_use_ -= n->requested;
    n->live = false;
    n->requested = 0;
    free_of(n->small).insert(merge(n));
  }

  std::size_t cached_bytes() const override {
    std::lock_guard lock(mu_);
    return held_ - in_use_;
  }

  bool has_cached(std::size_t size_class) const override {
    std::lock_guard lock(mu_);
    return best_fit(size_class) != nullptr;
  }

  std::size_t cached_after(std::size_t bytes) const override {
    const std::size_t size = size_class(bytes);
    std::lock_guard lock(mu_);
    const std::size_t cached = held_ - in_use_;
    return best_fit(size) ? cached - bytes : cached + segment_size(size) - bytes;
  }

  std::size_t largest_free_block() const override {
    std::lock_guard lock(mu_);
    std::size_t largest = 0;
    for (const FreeSet* f : {&small_free_, &large_free_})
      if (!f->empty()) largest = std::max(largest, (*f->rbegin())->size);
    return largest;
  }

  bool merges_free_blocks() const override { return true; }

  bool fits_if_freed(const Block& block, std::size_t size_class) const override {
    std::lock_guard lock(mu_);
    auto it = live_.find(block.ptr);
    if (it == live_.end()) return false;
    const Node* n = it->second;
    if (n->small != (size_class <= S::kSmallRequest)) return false;
    std::size_t span = n->size;
    if (n->prev && !n->prev->live) span += n->prev->size;
    if (n->next && !n->next->live) span += n->next->size;
    return span >= size_class;
  }

  std::size_t release_cached(std::size_t bytes, std::size_t keep_class) override {
    std::lock_guard lock(mu_);
    return release_locked(bytes, keep_class);
  }

 private:
  static std::size_t segment_size(std::size_t size) {
    if (size <= S::kSmallRequest) return S::kSmallSegment;
    if (size < S::kMediumRequest) return S::kMediumSegment;
    return round_up(size, S::kLargeRound);
  }
  FreeSet& free_of(bool small) { return small ? small_free_ : large_free_; }
  const FreeSet& free_of(bool small) const { return small ? small_free_ : large_free_; }

  Node* best_fit(std::size_t size) const {
    const FreeSet& f = free_of(size <= S::kSmallRequest);
    Node key;
    key.size = size;
    auto it = f.lower_bound(&key);  // the smallest block of at least `size`, lowest address
    return it == f.end() ? nullptr : *it;
  }

  // A fresh segment as one free block (in its free set), or nullptr when the source is out.
  Node* new_segment(std::size_t size) {
    const std::size_t bytes = segment_size(size);
    void* p = source_->map(bytes);
    if (!p) return nullptr;
    auto* n = new Node{static_cast<char*>(p), bytes, 0, false, size <= S::kSmallRequest};
    held_ += bytes;
    free_of(n->small).insert(n);
    return n;
  }

  // Cuts the tail of a free block beyond `size` into a free block of its own when it is worth
  // keeping; otherwise the whole block serves the request.
  void split(Node* n, std::size_t size) {
    const std::size_t rest = n->size - size;
    const bool worth = n->small ? rest >= S::kRound : rest > S::kSmallRequest;
    if (!worth) return;
    auto* tail = new Node{n->ptr + size, rest, 0, false, n->small, n, n->next};
    if (n->next) n->next->prev = tail;
    n->next = tail;
    n->size = size;
    free_of(n->small).insert(tail);
  }

  // Joins a freed block with its free neighbours (taking them out of the free set; a block's
  // key there is its size, so it leaves the set before it grows).
  Node* merge(Node* n) {
    FreeSet& f = free_of(n->small);
    if (Node* p = n->prev; p && !p->live) {
      f.erase(p);
      n = absorb_next(p, f);
    }
    if (Node* q = n->next; q && !q->live) n = absorb_next(n, f);
    return n;
  }
  // `a` takes over the block after it, which leaves the free set if it was there.
  static Node* absorb_next(Node* a, FreeSet& f) {
    Node* b = a->next;
    f.erase(b);
    a->size += b->size;
    a->next = b->next;
    if (b->next) b->next->prev = a;
    delete b;
    return a;
  }

  // Whole free segments go back to the source, largest first, keeping the one a request of
  // `keep_class` would use.
  std::size_t release_locked(std::size_t bytes, std::size_t keep_class) {
    const Node* keep = keep_class ? best_fit(keep_class) : nullptr;
    std::size_t released = 0;
    for (FreeSet* f : {&large_free_, &small_free_}) {
      for (auto it = f->end(); it != f->begin() && released < bytes;) {
        Node* n = *--it;
        if (n->prev || n->next || n == keep) continue;
        it = f->erase(it);
        source_->unmap(n->ptr, n->size);
        held_ -= n->size;
        released += n->size;
        delete n;
      }
    }
    return released;
  }

  std::unique_ptr<SegmentSource> source_;
  mutable std::mutex mu_;
  FreeSet small_free_, large_free_;
  std::unordered_map<void*, Node*> live_;
  std::size_t held_ = 0;    // bytes of all segments
  std::size_t in_use_ = 0;  // bytes requested by live blocks
};

}  // namespace

std::unique_ptr<Allocator> make_segment_allocator(std::unique_ptr<SegmentSource> source) {
  REMAT_CHECK(source, "make_segment_allocator: no segment source");
  return std::make_unique<SegmentAllocator>(std::move(source));
}

void* HostSegmentSource::map(std::size_t bytes) {
  if (mapped_ + bytes > capacity_) return nullptr;
  void* p = nullptr;
  if (backed_) {
    p = std::aligned_alloc(kBufferAlignment, bytes);
    if (!p) return nullptr;
  } else {
    p = reinterpret_cast<void*>(fake_next_);
    fake_next_ += bytes;
  }
  mapped_ += bytes;
  ++maps_;
  return p;
}

void HostSegmentSource::unmap(void* p, std::size_t bytes) {
  if (backed_) std::free(p);
  mapped_ -= bytes;
  ++unmaps_;
}

}  // namespace remat
