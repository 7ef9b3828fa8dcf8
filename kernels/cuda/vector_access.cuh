// The vectorised elementwise loops: 16-byte loads and stores over
// contiguous buffers, a scalar tail (kernels/cuda/vector_split.h).
//
// mapKernel streams one input into one output, zipKernel two inputs (each
// full-size or a single broadcast element) into one output. The per-element
// work is a functor of storage values (`__device__ D operator()(S) const`),
// so the unary math, the casts, Not and the binary arithmetic and unary
// gradients of kernels/cuda/ share these two loops. The vector body and the
// tail call the same functor on the same values: the results are the bits
// the scalar loop would give.
#pragma once

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/vector_split.h"

#include <cuda_runtime_api.h>

namespace mpc {
namespace cuda {

/// K elements of storage type T, aligned for 16-byte accesses.
template <typename T, int K> struct alignas(kVectorBytes) Group { T v[K]; };

template <typename S, typename D, typename F>
__global__ void mapKernel(const S *__restrict__ x, D *__restrict__ y,
                          VectorSplit split, F f) {
  constexpr int K = VectorGroup<sizeof(S), sizeof(D)>::value;
  const auto *gx = reinterpret_cast<const Group<S, K> *>(x);
  auto *gy = reinterpret_cast<Group<D, K> *>(y);
  for (int64_t g = globalIndex(); g < split.groups; g += globalStride()) {
    Group<S, K> in = gx[g];
    Group<D, K> out;
#pragma unroll
    for (int k = 0; k < K; ++k)
      out.v[k] = f(in.v[k]);
    gy[g] = out;
  }
  for (int64_t i = split.tailStart + globalIndex(); i < split.count;
       i += globalStride())
    y[i] = f(x[i]);
}

/// y[i] = f(x[i]) for i < n.
template <typename S, typename D, typename F>
void launchMap(const S *x, D *y, int64_t n, cudaStream_t stream, F f) {
  if (n == 0)
    return;
  constexpr int K = VectorGroup<sizeof(S), sizeof(D)>::value;
  VectorSplit split = vectorSplit(n, K, {x, y});
  mapKernel<<<gridFor(split.work()), kBlock, 0, stream>>>(x, y, split, f);
  MPC_CUDA_CHECK_LAUNCH("mapKernel");
}

/// A group of a full-size operand, or its single element repeated.
template <int K, typename T>
__device__ inline Group<T, K> loadGroup(const T *__restrict__ p, bool full,
                                        int64_t g) {
  if (full)
    return reinterpret_cast<const Group<T, K> *>(p)[g];
  Group<T, K> r;
  T v = p[0];
#pragma unroll
  for (int k = 0; k < K; ++k)
    r.v[k] = v;
  return r;
}

template <typename A, typename B, typename D, typename F>
__global__ void zipKernel(const A *__restrict__ a, bool fullA,
                          const B *__restrict__ b, bool fullB,
                          D *__restrict__ y, VectorSplit split, F f) {
  constexpr int K = VectorGroup<sizeof(A), sizeof(B), sizeof(D)>::value;
  auto *gy = reinterpret_cast<Group<D, K> *>(y);
  for (int64_t g = globalIndex(); g < split.groups; g += globalStride()) {
    Group<A, K> va = loadGroup<K>(a, fullA, g);
    Group<B, K> vb = loadGroup<K>(b, fullB, g);
    Group<D, K> out;
#pragma unroll
    for (int k = 0; k < K; ++k)
      out.v[k] = f(va.v[k], vb.v[k]);
    gy[g] = out;
  }
  for (int64_t i = split.tailStart + globalIndex(); i < split.count;
       i += globalStride())
    y[i] = f(a[fullA ? i : 0], b[fullB ? i : 0]);
}

/// y[i] = f(a[fullA ? i : 0], b[fullB ? i : 0]) for i < n. Only the
/// full-size operands need to be aligned for the vector body.
template <typename A, typename B, typename D, typename F>
void launchZip(const A *a, bool fullA, const B *b, bool fullB, D *y, int64_t n,
               cudaStream_t stream, F f) {
  if (n == 0)
    return;
  constexpr int K = VectorGroup<sizeof(A), sizeof(B), sizeof(D)>::value;
  VectorSplit split =
      vectorSplit(n, K,
                  {fullA ? static_cast<const void *>(a) : y,
                   fullB ? static_cast<const void *>(b) : y, y});
  zipKernel<<<gridFor(split.work()), kBlock, 0, stream>>>(a, fullA, b, fullB, y,
                                                          split, f);
  MPC_CUDA_CHECK_LAUNCH("zipKernel");
}

/// zipKernel where an operand may be a row repeated down the output (a
/// bias): rowGroupsA/B is the row's length in groups, 0 for a full operand.
template <typename A, typename B, typename D, typename F>
__global__ void zipRowsKernel(const A *__restrict__ a, int64_t rowGroupsA,
                              const B *__restrict__ b, int64_t rowGroupsB,
                              D *__restrict__ y, int64_t groups, F f) {
  constexpr int K = VectorGroup<sizeof(A), sizeof(B), sizeof(D)>::value;
  const auto *ga = reinterpret_cast<const Group<A, K> *>(a);
  const auto *gb = reinterpret_cast<const Group<B, K> *>(b);
  auto *gy = reinterpret_cast<Group<D, K> *>(y);
  for (int64_t g = globalIndex(); g < groups; g += globalStride()) {
    Group<A, K> va = ga[rowGroupsA ? g % rowGroupsA : g];
    Group<B, K> vb = gb[rowGroupsB ? g % rowGroupsB : g];
    Group<D, K> out;
#pragma unroll
    for (int k = 0; k < K; ++k)
      out.v[k] = f(va.v[k], vb.v[k]);
    gy[g] = out;
  }
}

/// y[i] = f(a[.], b[.]) over `count` elements, where an operand with rowA /
/// rowB set is a row of rowLength elements repeated down the output and
/// the other is full-size. Launches nothing and returns false unless the
/// row is a whole number of vector groups and every address is 16-byte
/// aligned (the caller then takes its general loop).
template <typename A, typename B, typename D, typename F>
bool launchZipRows(const A *a, bool rowA, const B *b, bool rowB, D *y,
                   int64_t count, int64_t rowLength, cudaStream_t stream, F f) {
  constexpr int K = VectorGroup<sizeof(A), sizeof(B), sizeof(D)>::value;
  if (count == 0 || !wholeAlignedGroups(rowLength, K, {a, b, y}))
    return false;
  int64_t groups = count / K, rowGroups = rowLength / K;
  zipRowsKernel<<<gridFor(groups), kBlock, 0, stream>>>(
      a, rowA ? rowGroups : 0, b, rowB ? rowGroups : 0, y, groups, f);
  MPC_CUDA_CHECK_LAUNCH("zipRowsKernel");
  return true;
}

/// The fp32 math of a unary op on storage values of Io (rounded once).
template <typename Io, typename Op> struct FloatMap {
  Op op;
  __device__ typename Io::Storage operator()(typename Io::Storage s) const {
    return Io::fromFloat(op(Io::toFloat(s)));
  }
};

/// The fp32 math of a binary op on storage values: a of A, b of B, the
/// result rounded once to D.
template <typename A, typename B, typename D, typename Op> struct FloatZip {
  Op op;
  __device__ typename D::Storage operator()(typename A::Storage a,
                                            typename B::Storage b) const {
    return D::fromFloat(op(A::toFloat(a), B::toFloat(b)));
  }
};

} // namespace cuda
} // namespace mpc
