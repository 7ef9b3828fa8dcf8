// Lowest-offset placement of buffers that live over intervals of time.
//
// The memory planner gives each transient buffer the lowest aligned offset at
// which it overlaps no buffer already placed whose lifetime overlaps its own
// (first fit, buffers taken largest first). Asking that of every placed buffer
// is quadratic: 5,921 buffers and 6.3M lifetime-overlapping pairs for a
// 64-layer transformer step. This structure answers it from a segment tree
// over time instead. A buffer [f, l] overlaps a query [qf, ql] exactly when
// it is live at qf or starts in (qf, ql], so each tree node keeps two sets
// of merged offset ranges: of the buffers whose lifetime's canonical cover
// holds the node ("live": a query reads them on qf's path to the root) and
// of the buffers that start in the node's time range ("starts": a query
// reads them on the cover of (qf, ql]). A query reads O(log T) sets and walks
// their merged ranges upward from offset 0 together; a placement adds one
// range to O(log T) sets. The ranges of all nodes live in one pool (no
// allocation per node), since plan-memory runs on every compile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mpc {

class LifetimeOffsets {
public:
  /// Times are 0 .. times-1 (node indices of the step).
  explicit LifetimeOffsets(int64_t times);

  /// The lowest multiple of `alignment` p such that [p, p + bytes) overlaps
  /// no placed buffer live at some time in [first, last]. Zero-byte buffers
  /// fit at 0 (an empty range overlaps nothing).
  size_t lowestFit(int64_t first, int64_t last, size_t bytes,
                   size_t alignment) const;
  /// Records a buffer at [offset, offset + bytes) live over [first, last].
  /// Zero-byte buffers are not recorded: they block nothing.
  void place(int64_t first, int64_t last, size_t offset, size_t bytes);

private:
  struct Span {
    size_t begin, end; ///< [begin, end) in bytes
  };
  /// One node's set: disjoint, non-touching spans sorted by offset, at
  /// pool_[at, at + size), with room for `cap` before it must move.
  /// 32-bit: a tree has two sets per node (32,768 for a 64-layer step),
  /// most of them small, and 12 bytes a set instead of 24 halve the fresh
  /// pages the tree's construction touches; 2^32 spans would be 64 GiB.
  struct SpanSet {
    uint32_t at = 0, size = 0, cap = 0;
  };
  /// Where a query's walk is in one set: the begin of its first span ending
  /// above the walk's offset (kept beside the span so the scan for a
  /// conflict reads one field a set, with no index to convert), that span,
  /// and the set's end.
  struct Cursor {
    size_t next;
    const Span *span, *stop;
  };

  /// lowestFit's walk over the sets it read (cursors[0, n), and a cursor
  /// whose next is 0 at cursors[n]), for one kind of alignment.
  template <bool PowerOfTwo>
  static size_t walkSets(Cursor *cursors, size_t n, size_t bytes,
                         size_t alignment);
  /// Adds [begin, end) to the set; false when the set held it already.
  inline bool addSpan(SpanSet &set, size_t begin, size_t end);
  /// addSpan's cases that move spans or the set (a search, a merge, an
  /// insert, growing): out of line, so the common ones stay small.
  [[gnu::noinline]] bool addSpanSlow(SpanSet &set, size_t begin, size_t end);

  size_t leaves_ = 1; ///< a power of two >= times
  size_t levels_ = 0; ///< log2(leaves_)
  std::vector<SpanSet> live_, starts_;
  std::unique_ptr<Span[]> pool_;
  size_t poolSize_ = 0, poolCap_ = 0;
  // Scratch of lowestFit (sized once: queries are hot). Sets walked to
  // their end are dropped (the last one takes the place), and a cursor
  // whose next is 0 ends the array.
  mutable std::vector<Cursor> cursors_;
};

} // namespace mpc
