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

#include "ir/host_device.h"

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
    offsetsIn<int64_t>(i, off);
  }

  /// offsets() in index type I: int32_t where every offset and count fits
  /// (fits32()), whose divisions cost a fraction of 64-bit ones on a GPU.
  template <typename I> MPC_HD void offsetsIn(I i, I (&off)[K]) const {
    if (simple) {
      for (int k = 0; k < K; ++k)
        off[k] = full[k] ? i : 0;
      return;
    }
    for (int k = 0; k < K; ++k)
      off[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      I c = i % I(dims[d]);
      i /= I(dims[d]);
      for (int k = 0; k < K; ++k)
        off[k] += c * I(strides[k][d]);
    }
  }

  /// Whether offsetsIn<int32_t> is exact: every output index, and every
  /// operand offset (at most the sum of (dim - 1) * |stride| from 0), below
  /// 2^31 in magnitude.
  bool fits32() const {
    constexpr int64_t kMax = int64_t(1) << 31;
    if (count >= kMax)
      return false;
    for (int k = 0; k < K; ++k) {
      int64_t reach = 0; // strides may be negative (a reversed Slice)
      for (int d = 0; d < rank; ++d)
        reach += (dims[d] - 1) *
                 (strides[k][d] < 0 ? -strides[k][d] : strides[k][d]);
      if (reach >= kMax)
        return false;
    }
    return true;
  }
};

/// The same offsets with fewer axes, for kernels that only call offsets():
/// axes of size 1 drop out, and an axis folds into the one before it when
/// every operand steps over the pair as over one axis (stride[d] ==
/// stride[d + 1] * dims[d + 1] for all operands: both contiguous, or both
/// repeated). A bias add [batch, seq, n] + [n] becomes [batch * seq, n].
template <int K> BroadcastGeometry<K> foldAxes(const BroadcastGeometry<K> &g) {
  if (g.simple)
    return g;
  BroadcastGeometry<K> f = g;
  f.rank = 0;
  for (int d = 0; d < g.rank; ++d) {
    if (g.dims[d] == 1)
      continue;
    bool folds = f.rank > 0;
    for (int k = 0; k < K && folds; ++k)
      folds = f.strides[k][f.rank - 1] == g.strides[k][d] * g.dims[d];
    if (folds) {
      f.dims[f.rank - 1] *= g.dims[d];
      for (int k = 0; k < K; ++k)
        f.strides[k][f.rank - 1] = g.strides[k][d];
      continue;
    }
    f.dims[f.rank] = g.dims[d];
    for (int k = 0; k < K; ++k)
      f.strides[k][f.rank] = g.strides[k][d];
    ++f.rank;
  }
  for (int d = f.rank; d < kMaxKernelRank; ++d) {
    f.dims[d] = 0;
    for (int k = 0; k < K; ++k)
      f.strides[k][d] = 0;
  }
  return f;
}

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

/// Whether folded geometry `f` is [rows, n] with every operand either full
/// (strides {n, 1}) or one row of n repeated down the rows (strides {0, 1}),
/// at least one of them a row: a bias add. row[k] says which operands are
/// rows (zipRowsKernel then reads them 16 bytes at a time).
template <int K>
bool isRowBroadcast(const BroadcastGeometry<K> &f, bool (&row)[K]) {
  bool any = false;
  for (int k = 0; k < K; ++k)
    row[k] = false;
  if (f.simple || f.rank != 2)
    return false;
  for (int k = 0; k < K; ++k) {
    if (f.strides[k][1] != 1)
      return false;
    row[k] = f.strides[k][0] == 0;
    if (!row[k] && f.strides[k][0] != f.dims[1])
      return false;
    any = any || row[k];
  }
  return any;
}

/// Elements of `elementSize` bytes a broadcast copy over `g` (after
/// foldAxes) may move as one unit of up to 16 bytes: the innermost axis is
/// contiguous in the source (stride 1), its length and every other stride
/// are multiples of the unit, and both addresses are aligned to it. A
/// transpose that keeps the innermost axis (the attention heads' split,
/// [B, T, H, dh] -> [B, H, T, dh]) then copies 16 bytes per index
/// computation instead of 2. 1 when nothing wider fits.
inline int64_t copyUnitElements(const BroadcastGeometry<1> &g,
                                size_t elementSize, uintptr_t x, uintptr_t y) {
  if (g.simple || g.rank == 0 || g.strides[0][g.rank - 1] != 1)
    return 1;
  for (int64_t unit = int64_t(16 / elementSize); unit > 1; unit /= 2) {
    uintptr_t bytes = uintptr_t(unit) * elementSize;
    bool fits =
        g.dims[g.rank - 1] % unit == 0 && x % bytes == 0 && y % bytes == 0;
    for (int d = 0; d + 1 < g.rank && fits; ++d)
      fits = g.strides[0][d] % unit == 0;
    if (fits)
      return unit;
  }
  return 1;
}

/// `g` counted in units of `unit` elements (copyUnitElements said it fits).
inline BroadcastGeometry<1> inUnits(const BroadcastGeometry<1> &g,
                                    int64_t unit) {
  BroadcastGeometry<1> u = g;
  u.dims[g.rank - 1] /= unit;
  u.count /= unit;
  for (int d = 0; d + 1 < g.rank; ++d)
    u.strides[0][d] /= unit;
  return u;
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
  // Axes of size 1 are left out (their index is always 0), and an axis of
  // the same kind (kept or reduced) as the one before it folds into it: the
  // input is contiguous, so the pair walks the same offsets in the same
  // order as one axis of their product (a bias gradient's [batch, seq, n]
  // to [n] is one reduced axis of batch * seq rows), with fewer divisions.
  enum { None, Kept, Reduced } last = None;
  for (int d = 0; d < rank; ++d) {
    int64_t size = from[size_t(d)];
    if (size == 1)
      continue;
    int64_t kept = d >= offset ? target[size_t(d - offset)] : 1;
    bool reduced = kept == 1;
    int &r = reduced ? g.reducedRank : g.keptRank;
    int64_t *dims = reduced ? g.reducedDims : g.keptDims;
    int64_t *strides = reduced ? g.reducedStrides : g.keptStrides;
    if (last == (reduced ? Reduced : Kept)) {
      dims[r - 1] *= size;
      strides[r - 1] = stride[size_t(d)];
    } else {
      dims[r] = size;
      strides[r++] = stride[size_t(d)];
    }
    (reduced ? g.reducedCount : g.outCount) *= size;
    last = reduced ? Reduced : Kept;
  }
  return g;
}

} // namespace cuda
} // namespace mpc
