// NameIndex: a hash index of items by the name each item carries.
//
// The Graph's name tables (values by name, node-name counters) were
// std::unordered_map<std::string, ...>: every entry a heap node plus a second
// heap copy of a name the item already holds, every probe a bucket-list walk
// through both, every name hashed by std::_Hash_bytes. They were a sixth of a
// compile's wall time. Here a slot is 16 bytes in one flat array: the name's
// full 64-bit hash and a pointer to the item. The key is the item's own name
// (no copy); a probe compares hashes first, so it reads a name only for the
// one slot that matches; growing reuses the stored hashes.
//
// Linear probing, at most half full; erasing shifts the following run back,
// so there are no tombstones. The index never iterates: nothing can depend on
// its order. An item's name must not change while it is in the index.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

namespace mpc {

/// The hash NameIndex uses: 8 bytes per multiply, for names of any length.
inline uint64_t hashName(std::string_view name) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  const char *p = name.data();
  size_t n = name.size();
  uint64_t h = uint64_t(n) * kMul;
  auto mix = [&](uint64_t word) {
    h = (h ^ word) * kMul;
    h ^= h >> 32;
  };
  if (n >= 8) {
    for (; n > 8; p += 8, n -= 8) {
      uint64_t word;
      std::memcpy(&word, p, 8);
      mix(word);
    }
    uint64_t last; // the final 8 bytes, overlapping the previous word
    std::memcpy(&last, name.data() + name.size() - 8, 8);
    mix(last);
  } else if (n >= 4) {
    uint32_t lo, hi; // two 4-byte reads, overlapping when n < 8
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    mix(uint64_t(lo) | uint64_t(hi) << 32);
  } else if (n > 0) {
    mix(uint64_t(uint8_t(p[0])) | uint64_t(uint8_t(p[n / 2])) << 8 |
        uint64_t(uint8_t(p[n - 1])) << 16);
  }
  h *= kMul; // spread the last word into the low bits the slot index uses
  return h ^ (h >> 29);
}

/// Items of type T by T::name() (a std::string the item owns, or a
/// std::string_view of text that lives as long as the item). Holds
/// pointers; the items live elsewhere and must outlive their entries.
template <class T> class NameIndex {
public:
  size_t size() const { return size_; }

  /// The item named `name`, or nullptr.
  T *find(std::string_view name) const { return find(name, hashName(name)); }
  T *find(std::string_view name, uint64_t hash) const {
    if (slots_.empty())
      return nullptr;
    for (size_t i = hash & mask();; i = (i + 1) & mask()) {
      const Slot &s = slots_[i];
      if (!s.item)
        return nullptr;
      if (s.hash == hash && std::string_view(s.item->name()) == name)
        return s.item;
    }
  }

  /// Adds `item` under its name when the name is free: {item, true}; else
  /// {the item holding the name, false}, and nothing changes.
  std::pair<T *, bool> insert(T *item) {
    return insert(item, hashName(item->name()));
  }
  std::pair<T *, bool> insert(T *item, uint64_t hash) {
    if (2 * (size_ + 1) > slots_.size())
      grow();
    std::string_view name = item->name();
    size_t i = hash & mask();
    for (;; i = (i + 1) & mask()) {
      Slot &s = slots_[i];
      if (!s.item)
        break;
      if (s.hash == hash && std::string_view(s.item->name()) == name)
        return {s.item, false};
    }
    slots_[i] = {hash, item};
    ++size_;
    return {item, true};
  }

  /// Puts `item` under its name, in place of the item holding it (returned)
  /// if any.
  T *assign(T *item) {
    const uint64_t hash = hashName(item->name());
    auto inserted = insert(item, hash);
    if (inserted.second)
      return nullptr;
    for (size_t i = hash & mask();; i = (i + 1) & mask())
      if (slots_[i].item == inserted.first) {
        slots_[i].item = item;
        return inserted.first;
      }
  }

  /// Removes the entry for `name`; returns the item it held, or nullptr.
  T *erase(std::string_view name) {
    if (slots_.empty())
      return nullptr;
    const uint64_t hash = hashName(name);
    size_t i = hash & mask();
    for (;; i = (i + 1) & mask()) {
      const Slot &s = slots_[i];
      if (!s.item)
        return nullptr;
      if (s.hash == hash && std::string_view(s.item->name()) == name)
        break;
    }
    T *removed = slots_[i].item;
    // Backward shift: move each later entry of the run into the hole unless
    // its home slot lies cyclically in (hole, its position].
    for (size_t j = (i + 1) & mask(); slots_[j].item; j = (j + 1) & mask()) {
      const size_t home = slots_[j].hash & mask();
      const bool homeInHoleToJ =
          i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!homeInHoleToJ) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
    return removed;
  }

  /// Room for n entries without growing.
  void reserve(size_t n) {
    if (2 * n > slots_.size())
      rehash(2 * n);
  }

private:
  struct Slot {
    uint64_t hash = 0;
    T *item = nullptr; // nullptr: empty
  };

  size_t mask() const { return slots_.size() - 1; }
  void grow() { rehash(slots_.empty() ? 16 : 2 * slots_.size()); }
  /// Re-lays the entries into at least `minSlots` slots (a power of two).
  void rehash(size_t minSlots) {
    size_t n = 16;
    while (n < minSlots)
      n *= 2;
    std::vector<Slot> old(n);
    old.swap(slots_);
    for (const Slot &s : old) {
      if (!s.item)
        continue;
      size_t i = s.hash & mask();
      while (slots_[i].item)
        i = (i + 1) & mask();
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_; // empty, or a power of two
  size_t size_ = 0;
};

} // namespace mpc
