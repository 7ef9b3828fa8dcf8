// The CUDA reduction kernels: SumToShape, ReduceSum/Mean/Max, ReduceGrad,
// ReduceExtremumGrad.
//
// Every sum walks its contributions in the input's row-major order and
// combines them in fp32, which is the order the CPU backend uses
// (kernels/cpu/reduction.cpp), so the results are the same bits.
// SumToShape (bias gradients: thousands of rows per column) sums chunks of
// kSumChunk terms in parallel, then the chunk sums (chunked_sum.h), 16
// bytes of adjacent outputs per thread where the layout allows; the
// reductions keep one thread per output element, which is slow for a
// reduction over the innermost axis of a large tensor, and a later
// increment can split per warp if a model needs it.
#include "kernels/common/chunked_sum.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/vector_access.cuh"

#include <string>

namespace mpc {
namespace cuda {
namespace {

/// Chunk j of output o's sum: its kSumChunk terms (fewer in the last
/// chunk) from zero in order. With one chunk that is the whole sum, stored
/// as the output's dtype; else the fp32 chunk sum goes to
/// partial[j * outCount + o]. Adjacent threads take adjacent outputs, which
/// are adjacent in dY when the kept axes are the inner ones (a bias
/// gradient), and a thread's terms are independent loads the unrolled loop
/// keeps in flight.
template <typename Io>
__global__ void sumChunksKernel(const typename Io::Storage *__restrict__ dy,
                                SumToShapeGeometry g, int64_t chunks,
                                float *__restrict__ partial, DType outType,
                                void *__restrict__ out) {
  for (int64_t j = blockIdx.y; j < chunks; j += gridDim.y) {
    int64_t first = j * kSumChunk;
    int64_t last =
        first + kSumChunk < g.reducedCount ? first + kSumChunk : g.reducedCount;
    for (int64_t o = globalIndex(); o < g.outCount; o += globalStride()) {
      const typename Io::Storage *p = dy + g.base(o);
      float acc = 0.0f;
      if (g.reducedRank <= 1) {
        int64_t stride = g.reducedRank ? g.reducedStrides[0] : 0;
        p += first * stride;
#pragma unroll 8
        for (int64_t r = first; r < last; ++r, p += stride)
          acc += Io::toFloat(*p);
      } else {
        for (int64_t r = first; r < last; ++r)
          acc += Io::toFloat(p[g.reduced(r)]);
      }
      if (partial)
        partial[j * g.outCount + o] = acc;
      else
        storeAs(outType, out, o, acc);
    }
  }
}

/// sumChunksKernel for a bias gradient's layout: the outputs contiguous in
/// dY (one kept axis of stride 1), one reduced axis whose row stride keeps
/// 16-byte alignment. Each thread sums kPack adjacent outputs, reading them
/// as one 16-byte unit per row (a warp reads 512 contiguous bytes where the
/// one-output threads read 64 or 128), with up to 16 rows' loads in flight.
/// Each output's terms are still added in order from zero: the same bits.
template <typename Io>
__global__ void
sumChunksPackedKernel(const typename Io::Storage *__restrict__ dy,
                      int64_t rowStride, int64_t outCount, int64_t reducedCount,
                      int64_t chunks, float *__restrict__ partial,
                      DType outType, void *__restrict__ out) {
  using S = typename Io::Storage;
  constexpr int kPack = VectorGroup<sizeof(S)>::value;
  using Pack = Group<S, kPack>;
  int64_t packs = outCount / kPack;
  for (int64_t j = blockIdx.y; j < chunks; j += gridDim.y) {
    int64_t first = j * kSumChunk;
    int64_t last =
        first + kSumChunk < reducedCount ? first + kSumChunk : reducedCount;
    for (int64_t q = globalIndex(); q < packs; q += globalStride()) {
      const S *p = dy + first * rowStride + q * kPack;
      float acc[kPack];
#pragma unroll
      for (int v = 0; v < kPack; ++v)
        acc[v] = 0.0f;
#pragma unroll 16
      for (int64_t r = first; r < last; ++r, p += rowStride) {
        Pack u = *reinterpret_cast<const Pack *>(p);
#pragma unroll
        for (int v = 0; v < kPack; ++v)
          acc[v] += Io::toFloat(u.v[v]);
      }
#pragma unroll
      for (int v = 0; v < kPack; ++v) {
        int64_t o = q * kPack + v;
        if (partial)
          partial[j * outCount + o] = acc[v];
        else
          storeAs(outType, out, o, acc[v]);
      }
    }
  }
}

/// Whether sumChunksPackedKernel takes this sum: outputs contiguous and a
/// whole number of 16-byte units, rows 16-byte aligned.
bool packedSumLayout(const SumToShapeGeometry &g, const void *dy,
                     size_t elementSize) {
  int pack = int(kVectorBytes / elementSize);
  return g.keptRank == 1 && g.keptStrides[0] == 1 && g.reducedRank == 1 &&
         g.reducedStrides[0] % pack == 0 &&
         wholeAlignedGroups(g.outCount, pack, {dy});
}

/// Each sum's chunk sums from zero in order.
__global__ void addChunkSumsKernel(const float *__restrict__ chunkSums,
                                   int64_t chunks, int64_t sums, DType outType,
                                   void *__restrict__ out) {
  for (int64_t o = globalIndex(); o < sums; o += globalStride()) {
    float acc = 0.0f;
    for (int64_t j = 0; j < chunks; ++j)
      acc += chunkSums[j * sums + o];
    storeAs(outType, out, o, acc);
  }
}

/// The two passes (one when the sum is one chunk).
void sumToShape(DType dyType, const void *dy, DType dxType, void *dx,
                const SumToShapeGeometry &g, void *scratch, cudaStream_t s,
                const char *what) {
  if (g.outCount == 0)
    return;
  requireDeviceFloat(dyType, what);
  requireDeviceFloat(dxType, what);
  int64_t chunks = sumChunks(g.reducedCount);
  if (chunks > 1 && !scratch)
    throw Error(std::string("internal error: ") + what +
                " without scratch for its chunk sums");
  float *partial = chunks > 1 ? static_cast<float *>(scratch) : nullptr;
  unsigned chunkGrid = unsigned(chunks < 65535 ? chunks : 65535);
  dispatchDeviceFloat(dyType, what, [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    auto *p = static_cast<const S *>(dy);
    if (packedSumLayout(g, dy, sizeof(S))) {
      int64_t packs = g.outCount / VectorGroup<sizeof(S)>::value;
      sumChunksPackedKernel<Io>
          <<<dim3(gridFor(packs), chunkGrid), kBlock, 0, s>>>(
              p, g.reducedStrides[0], g.outCount, g.reducedCount, chunks,
              partial, dxType, dx);
    } else {
      sumChunksKernel<Io>
          <<<dim3(gridFor(g.outCount), chunkGrid), kBlock, 0, s>>>(
              p, g, chunks, partial, dxType, dx);
    }
  });
  MPC_CUDA_CHECK_LAUNCH("sumChunksKernel");
  if (partial)
    launchAddChunkSums(partial, chunks, g.outCount, dxType, dx, s);
}

template <ReduceKind K>
__global__ void reduceKernel(DType t, const void *__restrict__ x,
                             void *__restrict__ y, SumToShapeGeometry g) {
  for (int64_t o = globalIndex(); o < g.outCount; o += globalStride()) {
    int64_t base = g.base(o);
    float acc = K == ReduceKind::Max ? -INFINITY : 0.0f;
    for (int64_t r = 0; r < g.reducedCount; ++r) {
      float v = loadAs(t, x, base + g.reduced(r));
      if (K == ReduceKind::Max) {
        if (v > acc || v != v) // NaN wins and then stays
          acc = acc != acc ? acc : v;
      } else {
        acc += v;
      }
    }
    if (K == ReduceKind::Mean)
      acc = acc / float(g.reducedCount);
    storeAs(t, y, o, acc);
  }
}

__global__ void reduceGradKernel(DType t, const void *__restrict__ dy,
                                 void *__restrict__ dx, BroadcastGeometry<1> g,
                                 bool mean, float count) {
  for (int64_t i = globalIndex(); i < g.count; i += globalStride()) {
    int64_t off[1];
    g.offsets(i, off);
    float v = loadAs(t, dy, off[0]);
    storeAs(t, dx, i, mean ? v / count : v);
  }
}

/// One thread per group: counts the group's elements equal to its
/// extremum, then writes every element of the group (each element of X is
/// in one group, so each is written once).
__global__ void reduceExtremumGradKernel(DType gt, const void *__restrict__ dy,
                                         DType xt, const void *__restrict__ x,
                                         DType yt, const void *__restrict__ y,
                                         void *__restrict__ dx,
                                         SumToShapeGeometry g) {
  for (int64_t o = globalIndex(); o < g.outCount; o += globalStride()) {
    int64_t base = g.base(o);
    float extremum = loadAs(yt, y, o), ties = 0.0f;
    for (int64_t r = 0; r < g.reducedCount; ++r)
      if (loadAs(xt, x, base + g.reduced(r)) == extremum)
        ties += 1.0f;
    float share = loadAs(gt, dy, o) / ties;
    for (int64_t r = 0; r < g.reducedCount; ++r) {
      int64_t k = base + g.reduced(r);
      storeAs(gt, dx, k, loadAs(xt, x, k) == extremum ? share : 0.0f);
    }
  }
}

} // namespace

void launchReduceExtremumGrad(DType dyType, const void *dy, DType xType,
                              const void *x, DType yType, const void *y,
                              void *dx, const SumToShapeGeometry &g,
                              cudaStream_t s) {
  if (g.outCount == 0 || g.reducedCount == 0)
    return;
  requireDeviceFloat(dyType, "ReduceExtremumGrad");
  requireDeviceFloat(xType, "ReduceExtremumGrad");
  requireDeviceFloat(yType, "ReduceExtremumGrad");
  reduceExtremumGradKernel<<<gridFor(g.outCount), kBlock, 0, s>>>(
      dyType, dy, xType, x, yType, y, dx, g);
  MPC_CUDA_CHECK_LAUNCH("reduceExtremumGradKernel");
}

void launchReduce(ReduceKind kind, DType t, const void *x, void *y,
                  const SumToShapeGeometry &g, cudaStream_t s) {
  if (g.outCount == 0)
    return;
  requireDeviceFloat(t, "Reduce");
  unsigned grid = gridFor(g.outCount);
  switch (kind) {
  case ReduceKind::Sum:
    reduceKernel<ReduceKind::Sum><<<grid, kBlock, 0, s>>>(t, x, y, g);
    break;
  case ReduceKind::Mean:
    reduceKernel<ReduceKind::Mean><<<grid, kBlock, 0, s>>>(t, x, y, g);
    break;
  case ReduceKind::Max:
    reduceKernel<ReduceKind::Max><<<grid, kBlock, 0, s>>>(t, x, y, g);
    break;
  }
  MPC_CUDA_CHECK_LAUNCH("reduceKernel");
}

void launchReduceGrad(DType t, const void *dy, void *dx,
                      const BroadcastGeometry<1> &g, bool mean, int64_t count,
                      cudaStream_t s) {
  if (g.count == 0)
    return;
  requireDeviceFloat(t, "ReduceGrad");
  reduceGradKernel<<<gridFor(g.count), kBlock, 0, s>>>(t, dy, dx, g, mean,
                                                       float(count));
  MPC_CUDA_CHECK_LAUNCH("reduceGradKernel");
}

size_t sumToShapeScratchBytes(const SumToShapeGeometry &g) {
  return chunkSumBytes(g.reducedCount, g.outCount);
}

void launchAddChunkSums(const float *chunkSums, int64_t chunks, int64_t sums,
                        DType outType, void *out, cudaStream_t s) {
  if (sums == 0)
    return;
  addChunkSumsKernel<<<gridFor(sums), kBlock, 0, s>>>(chunkSums, chunks, sums,
                                                      outType, out);
  MPC_CUDA_CHECK_LAUNCH("addChunkSumsKernel");
}

void launchSumToShape(DType t, const void *dy, void *dx,
                      const SumToShapeGeometry &g, void *scratch,
                      cudaStream_t s) {
  sumToShape(t, dy, t, dx, g, scratch, s, "SumToShape");
}

void launchSumToShapeAs(DType dyType, const void *dy, DType dxType, void *dx,
                        const SumToShapeGeometry &g, void *scratch,
                        cudaStream_t s) {
  sumToShape(dyType, dy, dxType, dx, g, scratch, s, "SumToShapeAs");
}

} // namespace cuda
} // namespace mpc
