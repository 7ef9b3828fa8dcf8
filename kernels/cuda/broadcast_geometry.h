// Index arithmetic of broadcasting kernels, shared by host and device.
//
// A BroadcastGeometry<K> maps element i (row-major) of an output shape onto
// the element offsets of K operands broadcast to it (numpy rules: shapes
// right-aligned, size-1 dims repeat). It is built on the host and passed to a
// kernel by value; offsets() is MPC_HD so the CPU tests check the same code
// the GPU runs. Operands that have the output's element count or a single
// element (the common case) skip the divisions, as the CPU backend's
// forEachBroadcast does.
#pragma once

#include "kernels/common/host_device.h"

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace mpc {
namespace cuda {

/// Ranks above this are refused by the builders (no model here has them).
constexpr int kMaxKernelRank = 8;

template <int K> struct BroadcastGeometry {
  int64_t count = 0; ///< output elements
  int rank = 0;
  bool simple = true; ///< every operand is full-size or a single element
  bool full[K] = {};  ///< with simple: operand k has count elements
  int64_t dims[kMaxKernelRank] = {};
  int64_t strides[K][kMaxKernelRank] = {}; ///< 0 on broadcast dims

  MPC_HD void offsets(int64_t i, int64_t (&off)[K]) const {
    if (simple) {
      for (int k = 0; k < K; ++k)
        off[k] = full[k] ? i : 0;
      return;
    }
    for (int k = 0; k < K; ++k)
      off[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t c = i % dims[d];
      i /= dims[d];
      for (int k = 0; k < K; ++k)
        off[k] += c * strides[k][d];
    }
  }
};

/// The geometry of operands `in` broadcast to `out` (each must broadcast;
/// the caller has checked). Throws std::length_error above kMaxKernelRank.
template <int K>
BroadcastGeometry<K>
makeBroadcastGeometry(const std::vector<int64_t> &out,
                      const std::vector<int64_t> (&in)[K]) {
  BroadcastGeometry<K> g;
  if (out.size() > size_t(kMaxKernelRank))
    throw std::length_error("rank above the cuda kernels' limit");
  g.rank = int(out.size());
  g.count = 1;
  for (int64_t d : out)
    g.count *= d;
  for (int d = 0; d < g.rank; ++d)
    g.dims[d] = out[size_t(d)];
  for (int k = 0; k < K; ++k) {
    int64_t n = 1;
    for (int64_t d : in[k])
      n *= d;
    g.full[k] = n == g.count;
    g.simple = g.simple && (n == g.count || n == 1);
    // Right-aligned row-major strides, 0 where the operand repeats.
    int64_t stride = 1;
    int offset = g.rank - int(in[k].size());
    for (int d = g.rank - 1; d >= 0; --d) {
      int64_t size = d >= offset ? in[k][size_t(d - offset)] : 1;
      g.strides[k][d] = size == 1 ? 0 : stride;
      stride *= size;
    }
  }
  return g;
}

/// Transpose as a strided copy: output element i (row-major over the
/// permuted dims) reads input offset sum c_d * inputStride[perm[d]], which
/// is a BroadcastGeometry<1> whose strides are the input's, permuted (never
/// `simple`). perm must be a permutation of [0, rank) (the caller checked).
inline BroadcastGeometry<1>
makeTransposeGeometry(const std::vector<int64_t> &in,
                      const std::vector<int64_t> &perm) {
  if (in.size() > size_t(kMaxKernelRank))
    throw std::length_error("rank above the cuda kernels' limit");
  BroadcastGeometry<1> g;
  g.rank = int(in.size());
  g.simple = false;
  std::vector<int64_t> stride(in.size(), 1);
  for (int d = g.rank - 2; d >= 0; --d)
    stride[size_t(d)] = stride[size_t(d + 1)] * in[size_t(d + 1)];
  g.count = 1;
  for (int d = 0; d < g.rank; ++d) {
    g.dims[d] = in[size_t(perm[size_t(d)])];
    g.strides[0][d] = stride[size_t(perm[size_t(d)])];
    g.count *= g.dims[d];
  }
  return g;
}

/// SumToShape's geometry: each output element (of the target shape) sums
/// the input elements that broadcasting copied it to, in the input's
/// row-major order (the CPU backend's order, so fp32 sums agree bit for bit).
struct SumToShapeGeometry {
  int64_t outCount = 0, reducedCount = 0;
  int keptRank = 0, reducedRank = 0;
  int64_t keptDims[kMaxKernelRank] = {}, keptStrides[kMaxKernelRank] = {};
  int64_t reducedDims[kMaxKernelRank] = {}, reducedStrides[kMaxKernelRank] = {};

  /// Input offset of output element o's first contribution.
  MPC_HD int64_t base(int64_t o) const {
    int64_t off = 0;
    for (int d = keptRank - 1; d >= 0; --d) {
      off += (o % keptDims[d]) * keptStrides[d];
      o /= keptDims[d];
    }
    return off;
  }
  /// Offset (from base) of contribution r, r in [0, reducedCount).
  MPC_HD int64_t reduced(int64_t r) const {
    int64_t off = 0;
    for (int d = reducedRank - 1; d >= 0; --d) {
      off += (r % reducedDims[d]) * reducedStrides[d];
      r /= reducedDims[d];
    }
    return off;
  }
};

/// `target` must broadcast to `from` (the caller has checked).
inline SumToShapeGeometry
makeSumToShapeGeometry(const std::vector<int64_t> &from,
                       const std::vector<int64_t> &target) {
  if (from.size() > size_t(kMaxKernelRank))
    throw std::length_error("rank above the cuda kernels' limit");
  SumToShapeGeometry g;
  int rank = int(from.size());
  int offset = rank - int(target.size());
  std::vector<int64_t> stride(from.size(), 1);
  for (int d = rank - 2; d >= 0; --d)
    stride[size_t(d)] = stride[size_t(d + 1)] * from[size_t(d + 1)];
  g.outCount = 1;
  g.reducedCount = 1;
  for (int d = 0; d < rank; ++d) {
    int64_t size = from[size_t(d)];
    int64_t kept = d >= offset ? target[size_t(d - offset)] : 1;
    if (kept == 1 && size != 1) {
      g.reducedDims[g.reducedRank] = size;
      g.reducedStrides[g.reducedRank++] = stride[size_t(d)];
      g.reducedCount *= size;
    } else {
      g.keptDims[g.keptRank] = size;
      g.keptStrides[g.keptRank++] = stride[size_t(d)];
      g.outCount *= size;
    }
  }
  return g;
}

} // namespace cuda
} // namespace mpc
