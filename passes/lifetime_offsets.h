// Lowest-offset placement of buffers that live over intervals of time.
//
// The memory planner gives each transient buffer the lowest aligned offset at
// which it overlaps no buffer already placed whose lifetime overlaps its own
// (first fit, buffers taken largest first). Asking that of every placed buffer
// is quadratic: 8,229 buffers and 9.2M lifetime-overlapping pairs for a
// 64-layer transformer step. This structure answers it from a segment tree
// over time instead: each tree node keeps the merged offset ranges of the
// buffers whose lifetime covers the node's time range ("exact") and of those
// placed anywhere in its subtree ("below"), so a query reads O(log T) sets of
// merged ranges and jumps over whole occupied blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
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
  /// Disjoint, non-touching [begin, end) offset ranges, sorted.
  using Spans = std::vector<std::pair<size_t, size_t>>;
  struct TreeNode {
    Spans exact, below;
  };

  /// Tree nodes whose time ranges exactly cover [first, last], and their
  /// strict ancestors (each once).
  void decompose(int64_t first, int64_t last, std::vector<size_t> &cover,
                 std::vector<size_t> &ancestors) const;
  static void addSpan(Spans &spans, size_t begin, size_t end);

  size_t leaves_ = 1; ///< a power of two >= times
  std::vector<TreeNode> tree_;
  // Scratch for decompose (reused: queries are hot).
  mutable std::vector<size_t> cover_, ancestors_;
  mutable std::vector<uint32_t> seen_;
  mutable uint32_t stamp_ = 0;
};

} // namespace mpc
