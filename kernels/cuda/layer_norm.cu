// CUDA LayerNormalization kernels: one warp per row for the statistics and
// dX, one thread per column (or 16 bytes of adjacent columns, where aligned)
// and chunk of rows for dScale/dBias.
//
// The forward's statistics are two-pass in fp32 (mean, then squared
// deviations), combined across the warp in a fixed tree (warp_reduce.cuh);
// every per-element step is the shared formula of
// kernels/common/layer_norm_math.h. The column sums of the backward walk
// the rows in order in chunks of kSumChunk rows, summed in parallel and
// then added in order (chunked_sum.h), exactly as the CPU kernel does.
#include "kernels/common/chunked_sum.h"
#include "kernels/common/layer_norm_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/vector_access.cuh"
#include "kernels/cuda/warp_reduce.cuh"

#include <type_traits>

namespace mpc {
namespace cuda {
namespace {

constexpr unsigned kRowsPerBlock = kBlock / kWarp;

__global__ void layerNormKernel(DType t, const void *__restrict__ x,
                                const void *__restrict__ scale,
                                const void *__restrict__ bias,
                                void *__restrict__ y, float *__restrict__ mean,
                                float *__restrict__ invStd, int64_t outer,
                                int64_t n, double epsilon, bool centered,
                                DType yType, void *__restrict__ ylow,
                                DType lowType) {
  int64_t lane = threadIdx.x % kWarp;
  int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
       row < outer; row += stride) {
    int64_t base = row * n;
    float m = 0.0f;
    if (centered) {
      float sum = 0.0f;
      for (int64_t j = lane; j < n; j += kWarp)
        sum += loadAs(t, x, base + j);
      m = layerNormMean(warpSum(sum), n);
    }
    float squares = 0.0f;
    for (int64_t j = lane; j < n; j += kWarp)
      squares += layerNormSquaredDeviation(loadAs(t, x, base + j), m);
    float inv = layerNormInvStd(warpSum(squares), n, epsilon);
    for (int64_t j = lane; y && j < n; j += kWarp) {
      float b = bias ? loadAs(t, bias, j) : 0.0f;
      float v = layerNormValue(loadAs(t, x, base + j), m, inv,
                               loadAs(t, scale, j), b);
      storeAs(yType, y, base + j, v);
      if (ylow) // Cast(Y, low): Y's value as stored, rounded once more
        storeAs(lowType, ylow, base + j,
                yType == DType::F32 ? v : loadAs(yType, y, base + j));
    }
    if (lane == 0) {
      if (mean)
        mean[row] = m;
      if (invStd)
        invStd[row] = inv;
    }
  }
}

/// How the gradient kernels read and write LayerNormGradArgs' tensors.
/// DynamicAccess switches on each tensor's dtype per element (any mix);
/// UniformAccess<Io> reads dY, X and scale as Io's storage and the
/// statistics as fp32 with no switch, which lets the loops keep loads in
/// flight (the common case: one dtype, fp32 statistics), and MixedAccess a
/// narrower dY likewise. The conversions are the same, so are the bits.
struct DynamicAccess {
  __device__ static float dy(const LayerNormGradArgs &a, int64_t i) {
    return loadAs(a.dyType, a.dy, i);
  }
  __device__ static float x(const LayerNormGradArgs &a, int64_t i) {
    return loadAs(a.xType, a.x, i);
  }
  __device__ static float scale(const LayerNormGradArgs &a, int64_t i) {
    return loadAs(a.scaleType, a.scale, i);
  }
  __device__ static float stat(const LayerNormGradArgs &a, const void *p,
                               int64_t i) {
    return loadAs(a.statType, p, i);
  }
  __device__ static void store(const LayerNormGradArgs &a, void *p, int64_t i,
                               float v) {
    storeAs(a.outType, p, i, v);
  }
};

/// dY read as DyIo's storage, X, scale and the outputs as Io's, the
/// statistics as fp32: UniformAccess when both are one type, else an
/// autocast island's fp16/bf16 dY beside its fp32 X, read without a switch.
template <typename DyIo, typename Io> struct MixedAccess {
  using S = typename Io::Storage;
  using DyS = typename DyIo::Storage;
  __device__ static float dy(const LayerNormGradArgs &a, int64_t i) {
    return DyIo::toFloat(static_cast<const DyS *>(a.dy)[i]);
  }
  __device__ static float x(const LayerNormGradArgs &a, int64_t i) {
    return Io::toFloat(static_cast<const S *>(a.x)[i]);
  }
  __device__ static float scale(const LayerNormGradArgs &a, int64_t i) {
    return Io::toFloat(static_cast<const S *>(a.scale)[i]);
  }
  __device__ static float stat(const LayerNormGradArgs &, const void *p,
                               int64_t i) {
    return static_cast<const float *>(p)[i];
  }
  __device__ static void store(const LayerNormGradArgs &, void *p, int64_t i,
                               float v) {
    static_cast<S *>(p)[i] = Io::fromFloat(v);
  }
};
template <typename Io> using UniformAccess = MixedAccess<Io, Io>;

template <typename Acc>
__global__ void layerNormGradInputKernel(LayerNormGradArgs a) {
  int64_t lane = threadIdx.x % kWarp;
  int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
       row < a.outer; row += stride) {
    int64_t base = row * a.n;
    float m = Acc::stat(a, a.mean, row);
    float is = Acc::stat(a, a.invStd, row);
    float sumG = 0.0f, sumGX = 0.0f;
    for (int64_t j = lane; j < a.n; j += kWarp) {
      float xhat = layerNormXhat(Acc::x(a, base + j), m, is);
      float g = Acc::dy(a, base + j) * Acc::scale(a, j);
      sumG += g;
      sumGX += g * xhat;
    }
    float sumAll = warpSum(sumG);
    float meanG = a.centered ? sumAll / float(a.n) : 0.0f;
    float meanGX = warpSum(sumGX) / float(a.n);
    for (int64_t j = lane; j < a.n; j += kWarp) {
      float xhat = layerNormXhat(Acc::x(a, base + j), m, is);
      float g = Acc::dy(a, base + j) * Acc::scale(a, j);
      Acc::store(a, a.dx, base + j,
                 layerNormGradInput(is, g, meanG, xhat, meanGX));
    }
  }
}

/// Chunk c of column j's dScale and dBias sums: rows [c * kSumChunk, ...)
/// from zero in order. With one chunk those are the sums, stored in the
/// outputs' dtype; else they go to the scratch: dScale's chunk sums, then
/// dBias's, each [chunks, n].
template <typename Acc>
__global__ void layerNormGradParamsKernel(LayerNormGradArgs a, int64_t chunks) {
  for (int64_t c = blockIdx.y; c < chunks; c += gridDim.y) {
    int64_t first = c * kSumChunk;
    int64_t last = first + kSumChunk < a.outer ? first + kSumChunk : a.outer;
    for (int64_t j = globalIndex(); j < a.n; j += globalStride()) {
      float ds = 0.0f, db = 0.0f;
      for (int64_t row = first; row < last; ++row) {
        float m = Acc::stat(a, a.mean, row);
        float is = Acc::stat(a, a.invStd, row);
        float g = Acc::dy(a, row * a.n + j);
        ds += g * layerNormXhat(Acc::x(a, row * a.n + j), m, is);
        db += g;
      }
      if (chunks > 1) {
        a.scratch[c * a.n + j] = ds;
        a.scratch[(chunks + c) * a.n + j] = db;
        continue;
      }
      if (a.dScale)
        Acc::store(a, a.dScale, j, ds);
      if (a.dBias)
        Acc::store(a, a.dBias, j, db);
    }
  }
}

/// layerNormGradParamsKernel for one storage type Io with fp32 statistics
/// (UniformAccess's case) when a row is a whole number of 16-byte units at
/// 16-byte aligned dY and X: each thread takes kPack adjacent columns, read
/// as one 16-byte unit of dY and of X per row. Each column's sums are the
/// same operations in the same order: the same bits.
template <typename Io>
__global__ void layerNormGradParamsPackedKernel(LayerNormGradArgs a,
                                                int64_t chunks) {
  using S = typename Io::Storage;
  constexpr int kPack = VectorGroup<sizeof(S)>::value;
  using Pack = Group<S, kPack>;
  const auto *dy = static_cast<const S *>(a.dy);
  const auto *x = static_cast<const S *>(a.x);
  const auto *mean = static_cast<const float *>(a.mean);
  const auto *invStd = static_cast<const float *>(a.invStd);
  int64_t packs = a.n / kPack;
  for (int64_t c = blockIdx.y; c < chunks; c += gridDim.y) {
    int64_t first = c * kSumChunk;
    int64_t last = first + kSumChunk < a.outer ? first + kSumChunk : a.outer;
    for (int64_t q = globalIndex(); q < packs; q += globalStride()) {
      float ds[kPack], db[kPack];
#pragma unroll
      for (int v = 0; v < kPack; ++v)
        ds[v] = db[v] = 0.0f;
#pragma unroll 4
      for (int64_t row = first; row < last; ++row) {
        float m = mean[row], is = invStd[row];
        int64_t at = row * a.n + q * kPack;
        Pack g = *reinterpret_cast<const Pack *>(dy + at);
        Pack xv = *reinterpret_cast<const Pack *>(x + at);
#pragma unroll
        for (int v = 0; v < kPack; ++v) {
          float gv = Io::toFloat(g.v[v]);
          ds[v] += gv * layerNormXhat(Io::toFloat(xv.v[v]), m, is);
          db[v] += gv;
        }
      }
#pragma unroll
      for (int v = 0; v < kPack; ++v) {
        int64_t j = q * kPack + v;
        if (chunks > 1) {
          a.scratch[c * a.n + j] = ds[v];
          a.scratch[(chunks + c) * a.n + j] = db[v];
          continue;
        }
        if (a.dScale)
          static_cast<S *>(a.dScale)[j] = Io::fromFloat(ds[v]);
        if (a.dBias)
          static_cast<S *>(a.dBias)[j] = Io::fromFloat(db[v]);
      }
    }
  }
}

/// The packed kernel's Io for accessor Acc: UniformAccess<Io>'s Io, else
/// void (DynamicAccess: dtypes that differ, read with a switch).
template <typename Acc> struct PackedIo { using type = void; };
template <typename Io> struct PackedIo<MixedAccess<Io, Io>> {
  using type = Io;
};

unsigned rowGrid(int64_t rows) {
  int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return unsigned(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

} // namespace

void launchLayerNorm(DType t, const void *x, const void *scale,
                     const void *bias, void *y, float *mean, float *invStd,
                     int64_t outer, int64_t n, double epsilon, cudaStream_t s,
                     bool centered, const LayerNormOut &out) {
  if (outer == 0)
    return;
  requireDeviceFloat(t, "LayerNormalization");
  DType yType = out.yType == DType::Undefined ? t : out.yType;
  requireDeviceFloat(yType, "LayerNormalization");
  if (out.ylow)
    requireDeviceFloat(out.lowType, "LayerNormalization");
  layerNormKernel<<<rowGrid(outer), kBlock, 0, s>>>(
      t, x, scale, bias, y, mean, invStd, outer, n, epsilon, centered, yType,
      out.ylow, out.lowType);
  MPC_CUDA_CHECK_LAUNCH("layerNormKernel");
}

namespace {

/// dX, then dScale/dBias's chunk sums and their totals, read through Acc.
template <typename Acc>
void launchGradKernels(const LayerNormGradArgs &a, cudaStream_t s) {
  if (a.dx && a.outer > 0) {
    layerNormGradInputKernel<Acc><<<rowGrid(a.outer), kBlock, 0, s>>>(a);
    MPC_CUDA_CHECK_LAUNCH("layerNormGradInputKernel");
  }
  // No rows is one empty chunk: the kernel writes zero sums.
  if (a.dScale || a.dBias) {
    int64_t chunks = sumChunks(a.outer);
    if (chunks > 1 && !a.scratch)
      throw Error("internal error: LayerNormalizationGrad without scratch "
                  "for its chunk sums");
    unsigned chunkGrid = unsigned(chunks < 65535 ? chunks : 65535);
    using Io = typename PackedIo<Acc>::type;
    bool packed = false;
    if constexpr (!std::is_void_v<Io>) {
      constexpr int64_t pack = VectorGroup<sizeof(typename Io::Storage)>::value;
      packed = wholeAlignedGroups(a.n, int(pack), {a.dy, a.x});
      if (packed)
        layerNormGradParamsPackedKernel<Io>
            <<<dim3(gridFor(a.n / pack), chunkGrid), kBlock, 0, s>>>(a, chunks);
    }
    if (!packed)
      layerNormGradParamsKernel<Acc>
          <<<dim3(gridFor(a.n), chunkGrid), kBlock, 0, s>>>(a, chunks);
    MPC_CUDA_CHECK_LAUNCH("layerNormGradParamsKernel");
    if (chunks > 1 && a.dScale)
      launchAddChunkSums(a.scratch, chunks, a.n, a.outType, a.dScale, s);
    if (chunks > 1 && a.dBias)
      launchAddChunkSums(a.scratch + chunks * a.n, chunks, a.n, a.outType,
                         a.dBias, s);
  }
}

} // namespace

size_t layerNormGradScratchBytes(const LayerNormGradArgs &a) {
  // dScale's chunk sums, then dBias's.
  return a.dScale || a.dBias ? 2 * chunkSumBytes(a.outer, a.n) : 0;
}

void launchLayerNormGrad(const LayerNormGradArgs &a, cudaStream_t s) {
  for (DType t : {a.dyType, a.xType, a.scaleType, a.statType, a.outType})
    requireDeviceFloat(t, "LayerNormalizationGrad");
  if (a.n == 0)
    return;
  bool sameRest = a.xType == a.scaleType && a.xType == a.outType &&
                  a.statType == DType::F32;
  if (sameRest && a.dyType == a.xType)
    dispatchDeviceFloat(a.dyType, "LayerNormalizationGrad", [&](auto io) {
      launchGradKernels<UniformAccess<decltype(io)>>(a, s);
    });
  else if (sameRest && a.xType == DType::F32 && a.dyType == DType::F16)
    launchGradKernels<MixedAccess<F16Dev, F32Dev>>(a, s);
  else if (sameRest && a.xType == DType::F32 && a.dyType == DType::BF16)
    launchGradKernels<MixedAccess<BF16Dev, F32Dev>>(a, s);
  else
    launchGradKernels<DynamicAccess>(a, s);
}

} // namespace cuda
} // namespace mpc
