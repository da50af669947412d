// An allocator for the framework's small, fixed-size objects that every op call creates (cells,
// records, tensor handles, graph nodes, with their shared_ptr control blocks): a freed block goes
// to a per-thread free list of its type and is handed out again, so steps of many small ops do
// not churn the C heap (glibc's malloc spent most of a 200,000-add chain in its bins).
// Usage: auto cell = std::allocate_shared<Cell>(RecyclingAllocator<Cell>(), ...);
#pragma once
#include <cstddef>
#include <limits>
#include <new>

namespace remat {

template <class T>
class RecyclingAllocator {
 public:
  using value_type = T;
  // Blocks a thread keeps per type; beyond it they go back to the heap.
  static constexpr std::size_t kMaxCached = std::size_t{1} << 20;

  RecyclingAllocator() = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit

  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                "over-aligned types need their own allocator");

  T* allocate(std::size_t n) {
    if (n == 1 && cache_.head) {
      Link* l = cache_.head;
      cache_.head = l->next;
      --cache_.count;
      return reinterpret_cast<T*>(l);
    }
    (void)&drainer_;  // registers the thread's drain at exit
    return static_cast<T*>(::operator new(n * sizeof(Block)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1 && cache_.count < kMaxCached) {
      auto* l = reinterpret_cast<Link*>(p);
      l->next = cache_.head;
      cache_.head = l;
      ++cache_.count;
      return;
    }
    ::operator delete(p);
  }
  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }

 private:
  struct Link {
    Link* next;
  };
  // Room for a T or a link, aligned for both.
  union alignas(alignof(T) > alignof(Link) ? alignof(T) : alignof(Link)) Block {
    Link link;
    unsigned char bytes[sizeof(T)];
  };
  // Trivially destructible, so blocks freed during static destruction (cells outlive main) still
  // find it; after the thread's drain it is closed and blocks go straight back to the heap.
  struct Cache {
    Link* head = nullptr;
    std::size_t count = 0;
  };
  struct Drainer {
    ~Drainer() {
      while (cache_.head) {
        Link* next = cache_.head->next;
        ::operator delete(cache_.head);
        cache_.head = next;
      }
      cache_.count = std::numeric_limits<std::size_t>::max();  // closed
    }
  };
  static thread_local Cache cache_;
  static thread_local Drainer drainer_;
};

template <class T>
thread_local typename RecyclingAllocator<T>::Cache RecyclingAllocator<T>::cache_;
template <class T>
thread_local typename RecyclingAllocator<T>::Drainer RecyclingAllocator<T>::drainer_;

}  // namespace remat
