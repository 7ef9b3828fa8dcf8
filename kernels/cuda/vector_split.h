// How an elementwise kernel splits n contiguous elements into 16-byte
// vector groups and a scalar tail, shared by host and device.
//
// The contiguous paths of the elementwise, cast and unary-gradient kernels
// (kernels/cuda/vector_access.cuh) load and store whole groups of elements,
// 16 bytes of the narrowest storage type at a time, when every buffer they
// stream through starts on a 16-byte boundary (every allocation of the
// backend does; a view into the middle of one may not). The last n % group
// elements, and every element of an unaligned buffer, take the scalar loop.
// Both loops compute each element with the same function, so the split only
// changes how bytes move, never the result. The arithmetic lives here, not
// in the .cu, so tests/backend-ops/vector_split_test.cpp checks it on the
// CPU.
#pragma once

#include "ir/host_device.h"

#include <cstdint>
#include <initializer_list>

namespace mpc {
namespace cuda {

/// Bytes one vector access moves.
constexpr int kVectorBytes = 16;

/// Elements of a group when the kernel streams storage types of sizes
/// Sizes... bytes: 16 bytes of the narrowest (a wider type's group is then
/// a whole number of 16-byte accesses: 8 halves are one, 8 floats two). A
/// class template, so device code takes it as a constant without
/// --expt-relaxed-constexpr.
template <int... Sizes> struct VectorGroup;
template <int S> struct VectorGroup<S> {
  static constexpr int narrowest = S;
  static constexpr int value = kVectorBytes / narrowest;
};
template <int S, int... Rest> struct VectorGroup<S, Rest...> {
  static constexpr int narrowest =
      S < VectorGroup<Rest...>::narrowest ? S : VectorGroup<Rest...>::narrowest;
  static constexpr int value = kVectorBytes / narrowest;
};

struct VectorSplit {
  int64_t count = 0;     ///< elements in all
  int64_t groups = 0;    ///< whole groups the vector body takes
  int64_t tailStart = 0; ///< first element of the scalar tail

  /// Work items of the grid: one per group and one per tail element.
  MPC_HD int64_t work() const { return groups + (count - tailStart); }
};

/// Whether an address may be read or written 16 bytes at a time.
MPC_HD bool aligned16(uintptr_t address) {
  return address % uintptr_t(kVectorBytes) == 0;
}

/// Whether rows of `rowLength` elements are whole groups of `group` and
/// every address is 16-byte aligned: a row kernel may then move 16 bytes at
/// a time with no tail (bias sums, LayerNormalizationGrad's columns, zipped
/// rows).
inline bool wholeAlignedGroups(int64_t rowLength, int group,
                               std::initializer_list<const void *> buffers) {
  if (group <= 0 || rowLength % group != 0)
    return false;
  for (const void *p : buffers)
    if (!aligned16(reinterpret_cast<uintptr_t>(p)))
      return false;
  return true;
}

/// The split of `count` elements into groups of `group` when every address
/// is 16-byte aligned, else none (the scalar loop takes all of them).
inline VectorSplit vectorSplit(int64_t count, int group,
                               std::initializer_list<const void *> buffers) {
  VectorSplit s;
  s.count = count;
  bool aligned = group > 0;
  for (const void *p : buffers)
    aligned = aligned && aligned16(reinterpret_cast<uintptr_t>(p));
  s.groups = aligned ? count / group : 0;
  s.tailStart = s.groups * group;
  return s;
}

} // namespace cuda
} // namespace mpc
