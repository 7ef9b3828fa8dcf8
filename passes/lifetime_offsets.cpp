// LifetimeOffsets: a segment tree over time of merged offset ranges.
#include "passes/lifetime_offsets.h"

#include <algorithm>

namespace mpc {

LifetimeOffsets::LifetimeOffsets(int64_t times) {
  while (int64_t(leaves_) < times)
    leaves_ *= 2;
  tree_.resize(2 * leaves_);
  seen_.assign(2 * leaves_, 0);
}

void LifetimeOffsets::decompose(int64_t first, int64_t last,
                                std::vector<size_t> &cover,
                                std::vector<size_t> &ancestors) const {
  cover.clear();
  ancestors.clear();
  // Bottom-up decomposition of the leaves [first, last + 1).
  for (size_t l = size_t(first) + leaves_, r = size_t(last) + 1 + leaves_;
       l < r; l /= 2, r /= 2) {
    if (l & 1)
      cover.push_back(l++);
    if (r & 1)
      cover.push_back(--r);
  }
  // Ancestors of the cover nodes: they hold buffers that span more than the
  // interval but overlap it. Stop at one already listed (its ancestors are).
  if (++stamp_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    stamp_ = 1;
  }
  for (size_t c : cover)
    for (size_t a = c / 2; a >= 1 && seen_[a] != stamp_; a /= 2) {
      seen_[a] = stamp_;
      ancestors.push_back(a);
    }
}

void LifetimeOffsets::addSpan(Spans &spans, size_t begin, size_t end) {
  // The first span ending at or after `begin` (touching spans merge too).
  auto it = std::partition_point(
      spans.begin(), spans.end(),
      [&](const std::pair<size_t, size_t> &s) { return s.second < begin; });
  if (it != spans.end() && it->first <= begin && end <= it->second)
    return; // already covered (the common case in the sets near the root)
  auto last = it;
  while (last != spans.end() && last->first <= end) {
    begin = std::min(begin, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  it = spans.erase(it, last);
  spans.insert(it, {begin, end});
}

size_t LifetimeOffsets::lowestFit(int64_t first, int64_t last, size_t bytes,
                                  size_t alignment) const {
  if (bytes == 0)
    return 0;
  decompose(first, last, cover_, ancestors_);
  auto alignUp = [&](size_t n) {
    return (n + alignment - 1) / alignment * alignment;
  };
  // Invariant: no aligned offset below `at` fits. A span that overlaps
  // [at, at + bytes) rules out every offset up to its end (spans are unions of
  // non-empty buffers, so overlapping the span means overlapping one).
  size_t at = 0;
  auto jumpOver = [&](const Spans &spans) {
    bool moved = false;
    auto it = std::partition_point(
        spans.begin(), spans.end(),
        [&](const std::pair<size_t, size_t> &s) { return s.second <= at; });
    while (it != spans.end() && it->first < at + bytes) {
      at = alignUp(it->second);
      moved = true;
      while (it != spans.end() && it->second <= at)
        ++it;
    }
    return moved;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t c : cover_)
      moved |= jumpOver(tree_[c].below);
    for (size_t a : ancestors_)
      moved |= jumpOver(tree_[a].exact);
  }
  return at;
}

void LifetimeOffsets::place(int64_t first, int64_t last, size_t offset,
                            size_t bytes) {
  if (bytes == 0)
    return;
  decompose(first, last, cover_, ancestors_);
  for (size_t c : cover_) {
    addSpan(tree_[c].exact, offset, offset + bytes);
    addSpan(tree_[c].below, offset, offset + bytes);
  }
  for (size_t a : ancestors_)
    addSpan(tree_[a].below, offset, offset + bytes);
}

} // namespace mpc
