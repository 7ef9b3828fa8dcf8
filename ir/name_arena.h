// NameArena: strings kept for as long as their owner, back to back in
// blocks.
//
// A graph remembers every node name it ever gave out (uniqueNodeName must
// not give one twice, even after the node is gone), some 13,000 names on a
// 64-layer step. As a std::string each, most were a heap allocation of their
// own beside a 40-byte entry; here they are copied into shared blocks and
// the entries hold views (no allocation per name, no free, half the bytes).
// Nothing is ever removed: the arena only grows.
#pragma once

#include <cstring>
#include <memory_resource>
#include <string_view>

namespace mpc {

class NameArena {
public:
  /// A copy of `s` that lives as long as the arena.
  std::string_view keep(std::string_view s) {
    if (s.empty())
      return {};
    auto *at = static_cast<char *>(blocks_.allocate(s.size(), 1));
    std::memcpy(at, s.data(), s.size());
    return {at, s.size()};
  }

private:
  /// The standard library's bump allocator over blocks from the heap, the
  /// first of 16 KiB; a name longer than the next block gets one of its own
  /// size.
  std::pmr::monotonic_buffer_resource blocks_{size_t(16) << 10};
};

} // namespace mpc
