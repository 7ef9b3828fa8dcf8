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

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace mpc {

class NameArena {
public:
  /// A copy of `s` that lives as long as the arena.
  std::string_view keep(std::string_view s) {
    if (s.size() > left_) {
      // A name longer than a block gets a block of its own size.
      size_t size = std::max(s.size(), kBlockBytes);
      blocks_.push_back(std::make_unique<char[]>(size));
      next_ = blocks_.back().get();
      left_ = size;
    }
    char *at = next_;
    if (!s.empty())
      std::memcpy(at, s.data(), s.size());
    next_ += s.size();
    left_ -= s.size();
    return {at, s.size()};
  }

private:
  static constexpr size_t kBlockBytes = size_t(16) << 10;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char *next_ = nullptr;
  size_t left_ = 0;
};

} // namespace mpc
