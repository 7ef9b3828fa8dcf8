// LifetimeOffsets: a segment tree over time of merged offset ranges.
#include "passes/lifetime_offsets.h"

#include <algorithm>
#include <cstring>

namespace mpc {

LifetimeOffsets::LifetimeOffsets(int64_t times) {
  while (int64_t(leaves_) < times) {
    leaves_ *= 2;
    ++levels_;
  }
  live_.resize(2 * leaves_);
  starts_.resize(2 * leaves_);
  // Room for what a training step's placements take (about 8 spans a time
  // step on a 64-layer transformer), so the pool rarely moves.
  poolCap_ = 8 * leaves_;
  pool_.reset(new Span[poolCap_]);
  cursors_.resize(3 * (levels_ + 1) + 1);
}

bool LifetimeOffsets::addSpan(SpanSet &set, size_t begin, size_t end) {
  // The common cases inline in place(), with no registers to save and no
  // call: an append past the set's last span (into the room it has, or a
  // set's first span), or a range at or past that span's begin that it
  // covers already (most placements near the root) or that extends it
  // (buffers packed side by side). 8 in 10 of a 64-layer step's calls end
  // here; the rest (a search, a merge, an insert, a set that moves) goes
  // out of line.
  const Span *s = pool_.get() + set.at;
  size_t size = set.size;
  if (size == 0 || s[size - 1].end < begin) {
    if (size == set.cap) {
      // A set's first span (most sets hold one or two): room for two at
      // the pool's end, while the pool has it.
      if (size != 0 || poolSize_ + 2 > poolCap_)
        return addSpanSlow(set, begin, end);
      set.at = uint32_t(poolSize_);
      set.cap = 2;
      poolSize_ += 2;
    }
    pool_[set.at + size] = {begin, end};
    set.size = uint32_t(size + 1);
    return true;
  }
  // Over or past the last span's begin: that span grows or holds it.
  Span &lastSpan = pool_[set.at + size - 1];
  if (lastSpan.begin <= begin) {
    if (end <= lastSpan.end)
      return false;
    lastSpan.end = end;
    return true;
  }
  return addSpanSlow(set, begin, end);
}

bool LifetimeOffsets::addSpanSlow(SpanSet &set, size_t begin, size_t end) {
  Span *s = pool_.get() + set.at;
  // The set's size in a full-width local: arithmetic on the 32-bit field
  // itself cost extensions at every use.
  size_t size = set.size;
  // The first span ending at or after `begin` (touching spans merge too).
  // Most placements land at or past a set's last span (8 in 10 on a
  // 64-layer step's), so those two places are tried before a binary search.
  size_t lo = 0, hi = 0;
  if (size == 0 || s[size - 1].end < begin)
    lo = hi = size;
  else if (size == 1 || s[size - 2].end < begin)
    lo = hi = size - 1;
  else
    hi = size - 2;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (s[mid].end < begin)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < size && s[lo].begin <= end) {
    // Overlaps or touches s[lo]: widen it over every span it now reaches.
    bool widened = begin < s[lo].begin;
    if (widened)
      s[lo].begin = begin;
    if (end <= s[lo].end)
      return widened; // else covered already (the common case near the root)
    size_t past = lo + 1;
    while (past < size && s[past].begin <= end) {
      if (s[past].end > end)
        end = s[past].end;
      ++past;
    }
    s[lo].end = end;
    if (past > lo + 1) {
      std::memmove(s + lo + 1, s + past, (size - past) * sizeof(Span));
      set.size = uint32_t(size - (past - lo - 1));
    }
    return true;
  }
  if (size == set.cap) {
    // Move the set to the pool's end with twice the room; the old room is
    // left unused (at most as much as the sets hold).
    size_t cap = set.cap ? 2 * size_t(set.cap) : 2;
    if (poolSize_ + cap > poolCap_) {
      size_t poolCap = std::max(2 * poolCap_, poolSize_ + cap);
      std::unique_ptr<Span[]> pool(new Span[poolCap]);
      if (poolSize_)
        std::memcpy(pool.get(), pool_.get(), poolSize_ * sizeof(Span));
      pool_ = std::move(pool);
      poolCap_ = poolCap;
    }
    if (size)
      std::memcpy(pool_.get() + poolSize_, pool_.get() + set.at,
                  size * sizeof(Span));
    set.at = uint32_t(poolSize_);
    set.cap = uint32_t(cap);
    poolSize_ += cap;
    s = pool_.get() + set.at;
  }
  if (lo < size) // not an append (most are)
    std::memmove(s + lo + 1, s + lo, (size - lo) * sizeof(Span));
  s[lo] = {begin, end};
  set.size = uint32_t(size + 1);
  return true;
}

template <bool PowerOfTwo>
inline size_t LifetimeOffsets::walkSets(Cursor *cursors, size_t n, size_t bytes,
                                        size_t alignment) {
  // Invariant: no aligned offset below `at` fits. A span that overlaps
  // [at, at + bytes) rules out every offset up to its end (spans are unions
  // of non-empty buffers, so overlapping the span means overlapping one).
  // The ranges below the answer are mostly one block split over the sets
  // in many pieces, so the walk goes to whichever set has a span starting
  // inside the window, and stops when a whole round of the sets has none.
  // A set walked to its end is dropped (the last one takes its place, and
  // the sentinel moves down): the order the sets are visited in changes
  // the walk, not the answer, which is the lowest offset no span rules out.
  // Rounding up by a mask where the alignment is a power of two (the
  // planner's 256; a division per step of the walk is slow), chosen once
  // per query by the template, not per step.
  const size_t mask = alignment - 1;
  auto alignUp = [&](size_t offset) {
    return PowerOfTwo ? (offset + mask) & ~mask
                      : (offset + mask) / alignment * alignment;
  };
  // The first cursor from `c` on whose next is below `limit` (there is one:
  // the scans below end at a stopper), looked at two a step (fewer
  // instructions on the walk's most run loop).
  auto firstInWindow = [](Cursor *c, size_t limit) {
    while (c->next >= limit) {
      if (c[1].next < limit)
        return c + 1;
      c += 2;
    }
    return c;
  };
  size_t at = 0;
  Cursor *end = cursors + n; // the sentinel
  for (Cursor *from = cursors;;) {
    const size_t limit = at + bytes;
    // The scans stop at a cursor whose next is below the limit: the
    // sentinel, or, for the round's wrap to the front, a 0 put in place of
    // the set the round started from for the scan's duration.
    Cursor *c = firstInWindow(from, limit);
    if (c == end) {
      const size_t saved = from->next;
      from->next = 0;
      c = firstInWindow(cursors, limit);
      from->next = saved;
      if (c == from)
        break;
    }
    // In locals: stores through c could alias the spans' loads.
    const Span *span = c->span, *stop = c->stop;
    if (span->end > at)
      at = alignUp(span->end);
    do
      ++span;
    while (span != stop && span->end <= at);
    if (span != stop) {
      c->next = span->begin;
      c->span = span;
    } else {
      --end;
      *c = *end;
      end->next = 0;
    }
    from = c;
  }
  return at;
}

size_t LifetimeOffsets::lowestFit(int64_t first, int64_t last, size_t bytes,
                                  size_t alignment) const {
  if (bytes == 0)
    return 0;
  // At most one set per level on the path and two per level on the cover
  // (the constructor sized the scratch for that and the sentinel).
  Cursor *cursors = cursors_.data();
  size_t n = 0;
  auto read = [&](const SpanSet &set) {
    if (!set.size)
      return;
    const Span *s = pool_.get() + set.at;
    cursors[n++] = {s->begin, s, s + set.size};
  };
  // Buffers live at `first`: the sets on its leaf's path, root first (the
  // order the walk visits the sets in; on a 64-layer step's placements this
  // one takes about a tenth fewer instructions than leaf first).
  for (size_t h = levels_ + 1; h-- > 0;)
    read(live_[(size_t(first) + leaves_) >> h]);
  // Buffers that start in (first, last]: the sets covering those leaves.
  for (size_t l = size_t(first) + 1 + leaves_, r = size_t(last) + 1 + leaves_;
       l < r; l /= 2, r /= 2) {
    if (l & 1)
      read(starts_[l++]);
    if (r & 1)
      read(starts_[--r]);
  }
  // A sentinel past the sets: below every window's end (bytes > 0), it
  // ends the scan for a conflict without a bounds check per set.
  cursors[n].next = 0;
  return alignment & (alignment - 1)
             ? walkSets<false>(cursors, n, bytes, alignment)
             : walkSets<true>(cursors, n, bytes, alignment);
}

void LifetimeOffsets::place(int64_t first, int64_t last, size_t offset,
                            size_t bytes) {
  if (bytes == 0)
    return;
  // Not into the nodes whose range begins at time 0 (the powers of two):
  // (first, last] never covers time 0, so no query reads their starts.
  // A node's starts hold its children's, so where the range was covered
  // already it is in every set above too (most placements stop there).
  for (size_t n = size_t(first) + leaves_; n & (n - 1); n /= 2)
    if (!addSpan(starts_[n], offset, offset + bytes))
      break;
  for (size_t l = size_t(first) + leaves_, r = size_t(last) + 1 + leaves_;
       l < r; l /= 2, r /= 2) {
    if (l & 1)
      addSpan(live_[l++], offset, offset + bytes);
    if (r & 1)
      addSpan(live_[--r], offset, offset + bytes);
  }
}

} // namespace mpc
