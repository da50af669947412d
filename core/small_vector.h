// A vector that keeps its first N elements inside the object and moves to the heap only past
// them.  Records and cells hold a few inputs, outputs and readers each; with their lists inline
// an op call's record is one allocation (from a recycling free list) instead of five mallocs,
// and a long lineage of records does not fragment the C library's heap.
// Usage: SmallVector<std::shared_ptr<Cell>, 2> inputs; inputs.push_back(cell);
#pragma once
#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <span>
#include <stdexcept>
#include <utility>

namespace remat {

template <class T, std::size_t N>
class SmallVector {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  SmallVector(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
  explicit SmallVector(std::span<const T> items) { assign(items.begin(), items.end()); }
  SmallVector(const SmallVector& other) { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { take(std::move(other)); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      clear();
      assign(other.begin(), other.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      clear();
      release_heap();
      take(std::move(other));
    }
    return *this;
  }
  ~SmallVector() {
    clear();
    release_heap();
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t capacity() const { return capacity_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  T& at(std::size_t i) { return i < size_ ? data_[i] : throw_out_of_range(); }
  const T& at(std::size_t i) const { return i < size_ ? data_[i] : throw_out_of_range(); }
  operator std::span<const T>() const { return {data_, size_}; }

  // Replaces the contents with [first, last) (move iterators move the elements in).
  template <class It>
  void assign(It first, It last) {
    clear();
    reserve(static_cast<std::size_t>(std::distance(first, last)));
    for (; first != last; ++first) emplace_back(*first);
  }
  void resize(std::size_t n) {
    reserve(n);
    while (size_ < n) emplace_back();
    while (size_ > n) pop_back();
  }
  void reserve(std::size_t n) {
    if (n > capacity_) grow(n);
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) return grow_and_emplace(std::forward<Args>(args)...);
    T* p = ::new (static_cast<void*>(data_ + size_)) T(std::forward<Args>(args)...);
    ++size_;
    return *p;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void pop_back() { data_[--size_].~T(); }
  void clear() {
    std::destroy(begin(), end());
    size_ = 0;
  }
  // Removes the elements `pred` holds for, keeping the order of the rest.
  template <class Pred>
  void erase_if(Pred pred) {
    T* kept = std::remove_if(begin(), end(), pred);
    std::destroy(kept, end());
    size_ = static_cast<std::size_t>(kept - data_);
  }

 private:
  void take(SmallVector&& other) {
    if (other.on_heap()) {
      data_ = other.data_, size_ = other.size_, capacity_ = other.capacity_;
      other.data_ = other.inline_data(), other.size_ = 0, other.capacity_ = N;
      return;
    }
    for (T& v : other) emplace_back(std::move(v));
    other.clear();
  }
  void grow(std::size_t n) {
    n = std::max<std::size_t>(n, N + 1);
    T* fresh = std::allocator<T>().allocate(n);
    move_into(fresh, n);
  }
  // The new element is built in the fresh buffer before the old ones move, because its
  // arguments may refer to one of them (v.push_back(v[0]) on a full vector).
  template <class... Args>
  T& grow_and_emplace(Args&&... args) {
    std::size_t n = std::max<std::size_t>(capacity_ * 2, N + 1);
    T* fresh = std::allocator<T>().allocate(n);
    T* p;
    try {
      p = ::new (static_cast<void*>(fresh + size_)) T(std::forward<Args>(args)...);
    } catch (...) {
      std::allocator<T>().deallocate(fresh, n);
      throw;
    }
    move_into(fresh, n);
    ++size_;
    return *p;
  }
  void move_into(T* fresh, std::size_t n) {
    std::uninitialized_move(begin(), end(), fresh);
    std::destroy(begin(), end());
    release_heap();
    data_ = fresh;
    capacity_ = n;
  }
  void release_heap() {
    if (on_heap()) std::allocator<T>().deallocate(data_, capacity_);
    data_ = inline_data();
    capacity_ = N;
  }
  bool on_heap() const { return data_ != inline_data(); }
  T* inline_data() { return reinterpret_cast<T*>(inline_); }
  const T* inline_data() const { return reinterpret_cast<const T*>(inline_); }
  [[noreturn]] static T& throw_out_of_range() { throw std::out_of_range("SmallVector::at"); }

  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* data_ = inline_data();
  std::size_t size_ = 0;
  std::size_t capacity_ = N;
};

}  // namespace remat
