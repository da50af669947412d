// Shape: the dims (or strides) of a tensor, a vector of int64 that keeps up to kInline values
// inline, so copying the metadata of a tensor of rank <= 6 never touches the heap (every op call
// copies several).  Larger ranks spill to the heap.  It converts to and from
// std::vector<std::int64_t> both ways, so code written against a vector keeps working.
#pragma once
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <vector>

namespace remat {

class Shape {
 public:
  using value_type = std::int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = std::int64_t&;
  using const_reference = const std::int64_t&;
  using pointer = std::int64_t*;
  using const_pointer = const std::int64_t*;
  using iterator = std::int64_t*;
  using const_iterator = const std::int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;
  static constexpr std::size_t kInline = 6;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> v) { assign(v.begin(), v.end()); }
  explicit Shape(std::size_t n, std::int64_t value = 0) { assign(n, value); }
  template <class It, class = typename std::iterator_traits<It>::iterator_category>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<std::int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit
  Shape(const Shape& o) { assign(o.begin(), o.end()); }
  Shape(Shape&& o) noexcept { steal(o); }
  Shape& operator=(const Shape& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Shape& operator=(Shape&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<std::int64_t> v) {
    assign(v.begin(), v.end());
    return *this;
  }
  ~Shape() { release(); }
  operator std::vector<std::int64_t>() const { return {begin(), end()}; }  // NOLINT: implicit

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t capacity() const { return heap_ ? capacity_ : kInline; }
  std::int64_t* data() { return heap_ ? heap_ : inline_; }
  const std::int64_t* data() const { return heap_ ? heap_ : inline_; }
  std::int64_t& operator[](std::size_t i) { return data()[i]; }
  const std::int64_t& operator[](std::size_t i) const { return data()[i]; }
  std::int64_t& at(std::size_t i);
  const std::int64_t& at(std::size_t i) const;
  std::int64_t& front() { return data()[0]; }
  const std::int64_t& front() const { return data()[0]; }
  std::int64_t& back() { return data()[size_ - 1]; }
  const std::int64_t& back() const { return data()[size_ - 1]; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  void reserve(std::size_t n) {
    if (n > capacity()) grow(n);
  }
  void clear() { size_ = 0; }
  void resize(std::size_t n, std::int64_t value = 0) {
    reserve(n);
    for (std::size_t i = size_; i < n; ++i) data()[i] = value;
    size_ = n;
  }
  void push_back(std::int64_t v) {
    if (size_ == capacity()) grow(size_ * 2);
    data()[size_++] = v;
  }
  std::int64_t& emplace_back(std::int64_t v) {
    push_back(v);
    return back();
  }
  void pop_back() { --size_; }
  void assign(std::size_t n, std::int64_t value) {
    size_ = 0;
    resize(n, value);
  }
  template <class It>
  void assign(It first, It last) {
    size_ = 0;
    if constexpr (std::is_base_of_v<std::forward_iterator_tag,
                                    typename std::iterator_traits<It>::iterator_category>)
      reserve(static_cast<std::size_t>(std::distance(first, last)));
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }
  iterator insert(const_iterator pos, std::int64_t v) { return insert(pos, 1, v); }
  iterator insert(const_iterator pos, std::size_t n, std::int64_t v) {
    const auto at = static_cast<std::size_t>(pos - begin());
    open_gap(at, n);
    std::fill_n(data() + at, n, v);
    return data() + at;
  }
  template <class It, class = typename std::iterator_traits<It>::iterator_category>
  iterator insert(const_iterator pos, It first, It last) {
    const auto at = static_cast<std::size_t>(pos - begin());
    const std::vector<std::int64_t> values(first, last);  // the range may alias this shape
    open_gap(at, values.size());
    std::copy(values.begin(), values.end(), data() + at);
    return data() + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<std::int64_t> v) {
    return insert(pos, v.begin(), v.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto a = static_cast<std::size_t>(first - begin());
    const auto b = static_cast<std::size_t>(last - begin());
    std::copy(data() + b, data() + size_, data() + a);
    size_ -= b - a;
    return data() + a;
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend std::strong_ordering operator<=>(const Shape& a, const Shape& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const Shape& a, const std::vector<std::int64_t>& b) {
    return a.size_ == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  void grow(std::size_t n);
  void open_gap(std::size_t at, std::size_t n) {
    reserve(size_ + n);
    std::int64_t* d = data();
    std::copy_backward(d + at, d + size_, d + size_ + n);
    size_ += n;
  }
  void release() {
    delete[] heap_;
    heap_ = nullptr;
  }
  void steal(Shape& o) noexcept {
    size_ = o.size_;
    if (o.heap_) {
      heap_ = o.heap_;
      capacity_ = o.capacity_;
      o.heap_ = nullptr;
    } else {
      std::memcpy(inline_, o.inline_, sizeof(std::int64_t) * o.size_);
    }
    o.size_ = 0;
  }

  std::int64_t inline_[kInline];
  std::int64_t* heap_ = nullptr;
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = 0;  // of heap_, when used
};

}  // namespace remat
