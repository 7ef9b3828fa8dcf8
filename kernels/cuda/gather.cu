// CUDA Gather and GatherGrad kernels: one thread per output element.
//
// Gather copies elements as raw bytes. GatherGrad's thread for dData
// element (o, r, i) walks the positions that gathered row r, in increasing
// order (GatherRowLists), adding dY's elements in fp32: the CPU kernel adds
// the same values in the same order, so the sums agree bit for bit, and
// since no two threads write one element no atomics are needed.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/gather.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__global__ void gatherKernel(const T *__restrict__ data,
                             const int64_t *__restrict__ rows,
                             T *__restrict__ y, GatherShape s) {
  int64_t count = s.outer * s.numIndices * s.inner;
  for (int64_t k = globalIndex(); k < count; k += globalStride()) {
    int64_t i = k % s.inner, j = (k / s.inner) % s.numIndices,
            o = k / (s.inner * s.numIndices);
    y[k] = data[(o * s.len + rows[j]) * s.inner + i];
  }
}

__global__ void gatherGradKernel(DType t, const void *__restrict__ dy,
                                 const int64_t *__restrict__ start,
                                 const int64_t *__restrict__ positions,
                                 void *__restrict__ dData, GatherShape s) {
  int64_t count = s.outer * s.len * s.inner;
  for (int64_t k = globalIndex(); k < count; k += globalStride()) {
    int64_t i = k % s.inner, r = (k / s.inner) % s.len,
            o = k / (s.inner * s.len);
    float acc = 0.0f;
    for (int64_t p = start[r]; p < start[r + 1]; ++p)
      acc += loadAs(t, dy, (o * s.numIndices + positions[p]) * s.inner + i);
    storeAs(t, dData, k, acc);
  }
}

template <typename T>
__global__ void
scatterLastKernel(const T *__restrict__ data, const T *__restrict__ updates,
                  const int64_t *__restrict__ start,
                  const int64_t *__restrict__ positions, T *__restrict__ out,
                  int64_t len, int64_t inner) {
  for (int64_t k = globalIndex(); k < len * inner; k += globalStride()) {
    int64_t e = k / inner, i = k % inner;
    out[k] = start[e + 1] > start[e]
                 ? updates[positions[start[e + 1] - 1] * inner + i]
                 : data[k];
  }
}

/// Integer element access in the shape of F32Dev/F16Dev/BF16Dev.
template <typename I> struct IntDev {
  using Storage = I;
  __device__ static I toFloat(I s) { return s; }
  __device__ static I fromFloat(I v) { return v; }
};

template <typename Io>
__global__ void scatterReduceKernel(
    ScatterReduction r, const typename Io::Storage *__restrict__ data,
    const typename Io::Storage *__restrict__ updates,
    const int64_t *__restrict__ start, const int64_t *__restrict__ positions,
    typename Io::Storage *__restrict__ out, int64_t len, int64_t inner) {
  for (int64_t k = globalIndex(); k < len * inner; k += globalStride()) {
    int64_t e = k / inner, i = k % inner;
    typename Io::Storage v = data[k];
    for (int64_t p = start[e]; p < start[e + 1]; ++p)
      v = Io::fromFloat(scatterUpdate(
          r, Io::toFloat(v), Io::toFloat(updates[positions[p] * inner + i])));
    out[k] = v;
  }
}

} // namespace

GatherRowLists gatherRowLists(const std::vector<int64_t> &rows, int64_t len) {
  GatherRowLists l;
  l.start.assign(size_t(len) + 1, 0);
  for (int64_t r : rows)
    ++l.start[size_t(r) + 1];
  for (size_t r = 0; r < size_t(len); ++r)
    l.start[r + 1] += l.start[r];
  l.positions.resize(rows.size());
  std::vector<int64_t> next(l.start.begin(), l.start.end() - 1);
  for (size_t j = 0; j < rows.size(); ++j)
    l.positions[size_t(next[size_t(rows[j])]++)] = int64_t(j);
  return l;
}

void launchGather(size_t elementSize, const void *data, const int64_t *rows,
                  void *y, const GatherShape &s, cudaStream_t st) {
  int64_t count = s.outer * s.numIndices * s.inner;
  if (count == 0)
    return;
  dispatchElementSize(elementSize, "Gather", [&](auto e) {
    using T = decltype(e);
    gatherKernel<<<gridFor(count), kBlock, 0, st>>>(
        static_cast<const T *>(data), rows, static_cast<T *>(y), s);
  });
  MPC_CUDA_CHECK_LAUNCH("gatherKernel");
}

void launchGatherGrad(DType t, const void *dy, const int64_t *start,
                      const int64_t *positions, void *dData,
                      const GatherShape &s, cudaStream_t st) {
  int64_t count = s.outer * s.len * s.inner;
  if (count == 0)
    return;
  requireDeviceFloat(t, "GatherGrad");
  gatherGradKernel<<<gridFor(count), kBlock, 0, st>>>(t, dy, start, positions,
                                                      dData, s);
  MPC_CUDA_CHECK_LAUNCH("gatherGradKernel");
}

void launchScatterRows(ScatterReduction r, DType t, const void *data,
                       const void *updates, const int64_t *start,
                       const int64_t *positions, void *out, int64_t len,
                       int64_t inner, cudaStream_t st) {
  int64_t count = len * inner;
  if (count == 0)
    return;
  if (r == ScatterReduction::None) {
    dispatchElementSize(dtypeSize(t), "ScatterElements", [&](auto e) {
      using T = decltype(e);
      scatterLastKernel<<<gridFor(count), kBlock, 0, st>>>(
          static_cast<const T *>(data), static_cast<const T *>(updates), start,
          positions, static_cast<T *>(out), len, inner);
    });
    MPC_CUDA_CHECK_LAUNCH("scatterLastKernel");
    return;
  }
  auto launch = [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    scatterReduceKernel<Io><<<gridFor(count), kBlock, 0, st>>>(
        r, static_cast<const S *>(data), static_cast<const S *>(updates), start,
        positions, static_cast<S *>(out), len, inner);
  };
  if (t == DType::I64)
    launch(IntDev<int64_t>{});
  else if (t == DType::I32)
    launch(IntDev<int32_t>{});
  else
    dispatchDeviceFloat(t, "ScatterElements", launch);
  MPC_CUDA_CHECK_LAUNCH("scatterReduceKernel");
}

} // namespace cuda
} // namespace mpc
