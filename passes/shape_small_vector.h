// SmallVector: a vector that keeps its first N elements inline, for the
// short lists shape inference builds per node (dims, perms, seen-flags).
//
// Verify re-infers every node a pass changed, tens of thousands of times in
// one compile, and each rule used to allocate a fresh std::vector or two for
// a rank-4 shape. Ranks are small, so the elements live inside the object
// and the heap is touched only past N. Only for trivially copyable element
// types (Dim, int64_t, bool): growing is a memcpy, destruction a no-op.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

namespace mpc {

template <typename T, size_t N> class SmallVector {
  static_assert(std::is_trivially_copyable_v<T> &&
                    std::is_trivially_destructible_v<T>,
                "SmallVector holds trivially copyable types only");

public:
  SmallVector() = default;
  /// `count` copies of `value`.
  SmallVector(size_t count, const T &value) { resize(count, value); }
  /// A copy of [first, first + count).
  SmallVector(const T *first, size_t count) { append(first, count); }
  SmallVector(const SmallVector &o) { append(o.data(), o.size()); }
  // (No move: a copy of the few inline elements is what a move would cost.)
  SmallVector &operator=(const SmallVector &o) {
    if (this != &o) {
      size_ = 0;
      append(o.data(), o.size());
    }
    return *this;
  }
  ~SmallVector() {
    if (heap_)
      std::free(heap_);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T *data() { return data_; }
  const T *data() const { return data_; }
  T *begin() { return data(); }
  T *end() { return data() + size_; }
  const T *begin() const { return data(); }
  const T *end() const { return data() + size_; }
  T &operator[](size_t i) {
    assert(i < size_);
    return data()[i];
  }
  const T &operator[](size_t i) const {
    assert(i < size_);
    return data()[i];
  }
  T &back() { return (*this)[size_ - 1]; }
  const T &back() const { return (*this)[size_ - 1]; }

  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n > capacity_)
      grow(n);
  }
  void push_back(const T &v) {
    if (__builtin_expect(size_ == capacity_, 0)) {
      pushBackGrowing(v);
      return;
    }
    new (data_ + size_++) T(v);
  }
  /// Appends [first, first + count), which must not lie inside this vector.
  void append(const T *first, size_t count) {
    reserve(size_ + count);
    if (count)
      std::memcpy(static_cast<void *>(data() + size_), first,
                  count * sizeof(T));
    size_ += count;
  }
  void resize(size_t n, const T &value) {
    reserve(n);
    for (size_t i = size_; i < n; ++i)
      new (data() + i) T(value);
    size_ = n;
  }
  /// Removes element i, keeping the order of the rest.
  void erase(size_t i) {
    assert(i < size_);
    T *d = data();
    std::memmove(static_cast<void *>(d + i), d + i + 1,
                 (size_ - i - 1) * sizeof(T));
    --size_;
  }

private:
  T *inlineData() { return reinterpret_cast<T *>(inline_); }
  const T *inlineData() const { return reinterpret_cast<const T *>(inline_); }
  [[gnu::noinline]] void pushBackGrowing(T v) { // a copy: v may live here
    grow(capacity_ * 2);
    new (data_ + size_++) T(v);
  }
  void grow(size_t n) {
    if (n < N * 2)
      n = N * 2;
    T *fresh = static_cast<T *>(std::malloc(n * sizeof(T)));
    if (!fresh)
      throw std::bad_alloc();
    if (size_)
      std::memcpy(static_cast<void *>(fresh), data_, size_ * sizeof(T));
    if (heap_)
      std::free(heap_);
    heap_ = data_ = fresh;
    capacity_ = n;
  }

  alignas(T) unsigned char inline_[N * sizeof(T)];
  T *heap_ = nullptr;      ///< owned storage once past N, or null
  T *data_ = inlineData(); ///< heap_ or the inline storage
  size_t size_ = 0;
  size_t capacity_ = N;
};

} // namespace mpc
