// ByteBuffer: a tensor's bytes, either owned, a view into memory someone
// else owns (the executor's arena, runtime/executor.h), or held: memory kept
// alive by a shared owner the buffer holds a reference to (a model's raw data
// taken over from its parsed protobuf, untouched zero pages; see
// ir/zero_pages.h). Held bytes may also be in place: read-only, at any
// alignment (a weight's bytes where they lie in the mapped model file,
// loadModel's WeightBytes::InFile), and copied into owned storage the first
// time anyone asks for them by anything but unalignedData().
//
// It has the std::vector<uint8_t> calls tensors have always used (data, size,
// resize, assign, begin/end, []), so code that fills a tensor does not care
// where the bytes live. The one difference is on purpose: assigning bytes of
// the same size to a view copies them into the view, so a kernel writing
// `y.bytes = x.bytes` into an arena-backed output stays in its planned place.
// Anything that changes a view's or held buffer's size detaches it into owned
// storage (the executor notices such an output and moves it back into the
// arena). Held bytes are this buffer's alone to write (the owner is shared
// only to keep the memory mapped or allocated), so writing through data()
// needs no detach.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

namespace mpc {

class ByteBuffer {
public:
  ByteBuffer() = default;
  ByteBuffer(std::vector<uint8_t> v) : owned_(std::move(v)) { sync(); }

  /// A view of `size` bytes at `p` (not owned; the owner outlives the view).
  static ByteBuffer view(uint8_t *p, size_t size) {
    ByteBuffer b;
    b.data_ = p;
    b.size_ = size;
    b.isView_ = true;
    return b;
  }

  /// `size` bytes at `p`, which `keeper` keeps valid (and no one else
  /// writes) for as long as the buffer holds it.
  static ByteBuffer held(uint8_t *p, size_t size,
                         std::shared_ptr<const void> keeper) {
    ByteBuffer b;
    b.data_ = p;
    b.size_ = size;
    b.keeper_ = std::move(keeper);
    return b;
  }

  /// `size` bytes at `p`, at any alignment, that `keeper` keeps valid and
  /// no one writes: in place. unalignedData() reads them where they lie; any
  /// other access (data(), begin(), [], resizing to another size) first
  /// copies them into owned storage, so typed code always gets aligned,
  /// writable bytes of the buffer's own. That copy may happen in a const
  /// call: the first access of an in-place buffer must not race another.
  static ByteBuffer inPlace(const uint8_t *p, size_t size,
                            std::shared_ptr<const void> keeper) {
    ByteBuffer b = held(const_cast<uint8_t *>(p), size, std::move(keeper));
    b.inPlace_ = true;
    return b;
  }

  ByteBuffer(const ByteBuffer &o)
      : owned_(o.data_, o.data_ + o.size_) { // copies are always owned
    sync();
  }
  ByteBuffer(ByteBuffer &&o) noexcept { *this = std::move(o); }

  ByteBuffer &operator=(const ByteBuffer &o) {
    if (this == &o)
      return *this;
    if (isView_ && o.size_ == size_) {
      if (size_)
        std::memmove(data_, o.data_, size_);
      return *this;
    }
    owned_.assign(o.data_, o.data_ + o.size_);
    isView_ = false;
    inPlace_ = false;
    keeper_.reset();
    sync();
    return *this;
  }
  ByteBuffer &operator=(ByteBuffer &&o) noexcept {
    if (this == &o)
      return *this;
    owned_ = std::move(o.owned_);
    keeper_ = std::move(o.keeper_);
    data_ = o.data_;
    size_ = o.size_;
    isView_ = o.isView_;
    inPlace_ = o.inPlace_;
    if (!isView_ && !keeper_)
      sync();
    o.owned_.clear();
    o.keeper_.reset();
    o.data_ = nullptr;
    o.size_ = 0;
    o.isView_ = false;
    o.inPlace_ = false;
    return *this;
  }

  /// The bytes as a vector (a copy).
  operator std::vector<uint8_t>() const {
    return {data_, data_ + size_}; // bytes read where they lie
  }
  friend bool operator==(const ByteBuffer &a, const ByteBuffer &b) {
    return a.size_ == b.size_ &&
           (a.size_ == 0 || std::memcmp(a.data_, b.data_, a.size_) == 0);
  }
  friend bool operator!=(const ByteBuffer &a, const ByteBuffer &b) {
    return !(a == b);
  }
  friend bool operator==(const ByteBuffer &a, const std::vector<uint8_t> &b) {
    return a.size_ == b.size() &&
           (a.size_ == 0 || std::memcmp(a.data_, b.data(), a.size_) == 0);
  }

  bool isView() const { return isView_; }
  /// True while the bytes are held through a shared owner (held(),
  /// inPlace()).
  bool isHeld() const { return keeper_ != nullptr; }
  /// True while the bytes are in place (inPlace(): not yet copied).
  bool isInPlace() const { return inPlace_; }
  uint8_t *data() { return own(); }
  const uint8_t *data() const { return own(); }
  /// The bytes where they lie, at any alignment, never copied: for code
  /// that copies them out as bytes (the model writer, memcpy).
  const uint8_t *unalignedData() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint8_t *begin() { return own(); }
  uint8_t *end() { return own() + size_; }
  const uint8_t *begin() const { return own(); }
  const uint8_t *end() const { return own() + size_; }
  uint8_t &operator[](size_t i) { return own()[i]; }
  const uint8_t &operator[](size_t i) const { return own()[i]; }

  /// n bytes of value v; a view of exactly n bytes is filled in place.
  void assign(size_t n, uint8_t v) {
    if (isView_ && n == size_) {
      if (n)
        std::memset(data_, v, n);
      return;
    }
    forget();
    owned_.assign(n, v);
    sync();
  }
  template <typename It> void assign(It first, It last) {
    std::vector<uint8_t> tmp(first, last); // the range may alias our bytes
    if (isView_ && tmp.size() == size_) {
      if (size_)
        std::memcpy(data_, tmp.data(), size_);
      return;
    }
    forget();
    owned_ = std::move(tmp);
    sync();
  }
  void resize(size_t n, uint8_t v = 0) {
    if ((isView_ || keeper_) && n == size_)
      return;
    detach();
    owned_.resize(n, v);
    sync();
  }
  void clear() {
    forget();
    owned_.clear();
    sync();
  }

private:
  /// The bytes, copied into owned storage first when in place (the one
  /// check every access pays).
  uint8_t *own() const {
    if (__builtin_expect(inPlace_, false))
      copyInPlaceBytes();
    return data_;
  }
  /// own()'s copy, kept out of its callers (every data() of every kernel).
  [[gnu::noinline, gnu::cold]] void copyInPlaceBytes() const { detach(); }
  /// A view or held buffer becomes owned storage holding the same bytes.
  /// (const: an in-place buffer does this on its first const access.)
  void detach() const {
    if (!isView_ && !keeper_)
      return;
    owned_.assign(data_, data_ + size_);
    isView_ = false;
    inPlace_ = false;
    keeper_.reset();
    sync();
  }
  /// Lets go of a view or held bytes without copying them (they are about
  /// to be replaced); owned storage is left as it is.
  void forget() {
    isView_ = false;
    inPlace_ = false;
    keeper_.reset();
  }
  void sync() const {
    data_ = owned_.data();
    size_ = owned_.size();
  }

  // Mutable for an in-place buffer's copy on first access (own()); every
  // other change goes through non-const calls.
  mutable std::vector<uint8_t> owned_;
  mutable std::shared_ptr<const void> keeper_; ///< held bytes only
  mutable uint8_t *data_ = nullptr;
  mutable size_t size_ = 0;
  mutable bool isView_ = false;
  mutable bool inPlace_ = false; ///< see inPlace()
};

} // namespace mpc
