// CUDA LayerNormalization kernels: one warp per row for the statistics and
// dX, one thread per column and chunk of rows for dScale/dBias.
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
#include "kernels/cuda/warp_reduce.cuh"

#include <stdexcept>

namespace mpc {
namespace cuda {
namespace {

constexpr unsigned kRowsPerBlock = kBlock / kWarp;

__global__ void layerNormKernel(DType t, const void *__restrict__ x,
                                const void *__restrict__ scale,
                                const void *__restrict__ bias,
                                void *__restrict__ y, float *__restrict__ mean,
                                float *__restrict__ invStd, int64_t outer,
                                int64_t n, double epsilon) {
  int64_t lane = threadIdx.x % kWarp;
  int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
       row < outer; row += stride) {
    int64_t base = row * n;
    float sum = 0.0f;
    for (int64_t j = lane; j < n; j += kWarp)
      sum += loadAs(t, x, base + j);
    float m = layerNormMean(warpSum(sum), n);
    float squares = 0.0f;
    for (int64_t j = lane; j < n; j += kWarp)
      squares += layerNormSquaredDeviation(loadAs(t, x, base + j), m);
    float inv = layerNormInvStd(warpSum(squares), n, epsilon);
    for (int64_t j = lane; j < n; j += kWarp) {
      float b = bias ? loadAs(t, bias, j) : 0.0f;
      storeAs(t, y, base + j,
              layerNormValue(loadAs(t, x, base + j), m, inv,
                             loadAs(t, scale, j), b));
    }
    if (lane == 0) {
      if (mean)
        mean[row] = m;
      if (invStd)
        invStd[row] = inv;
    }
  }
}

__global__ void layerNormGradInputKernel(LayerNormGradArgs a) {
  int64_t lane = threadIdx.x % kWarp;
  int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
       row < a.outer; row += stride) {
    int64_t base = row * a.n;
    float m = loadAs(a.statType, a.mean, row);
    float is = loadAs(a.statType, a.invStd, row);
    float sumG = 0.0f, sumGX = 0.0f;
    for (int64_t j = lane; j < a.n; j += kWarp) {
      float xhat = layerNormXhat(loadAs(a.xType, a.x, base + j), m, is);
      float g =
          loadAs(a.dyType, a.dy, base + j) * loadAs(a.scaleType, a.scale, j);
      sumG += g;
      sumGX += g * xhat;
    }
    float meanG = warpSum(sumG) / float(a.n);
    float meanGX = warpSum(sumGX) / float(a.n);
    for (int64_t j = lane; j < a.n; j += kWarp) {
      float xhat = layerNormXhat(loadAs(a.xType, a.x, base + j), m, is);
      float g =
          loadAs(a.dyType, a.dy, base + j) * loadAs(a.scaleType, a.scale, j);
      storeAs(a.dyType, a.dx, base + j,
              layerNormGradInput(is, g, meanG, xhat, meanGX));
    }
  }
}

/// Chunk c of column j's dScale and dBias sums: rows [c * kSumChunk, ...)
/// from zero in order. With one chunk those are the sums, stored in dY's
/// dtype; else they go to the scratch: dScale's chunk sums, then dBias's,
/// each [chunks, n].
__global__ void layerNormGradParamsKernel(LayerNormGradArgs a, int64_t chunks) {
  for (int64_t c = blockIdx.y; c < chunks; c += gridDim.y) {
    int64_t first = c * kSumChunk;
    int64_t last = first + kSumChunk < a.outer ? first + kSumChunk : a.outer;
    for (int64_t j = globalIndex(); j < a.n; j += globalStride()) {
      float ds = 0.0f, db = 0.0f;
      for (int64_t row = first; row < last; ++row) {
        float m = loadAs(a.statType, a.mean, row);
        float is = loadAs(a.statType, a.invStd, row);
        float g = loadAs(a.dyType, a.dy, row * a.n + j);
        ds += g * layerNormXhat(loadAs(a.xType, a.x, row * a.n + j), m, is);
        db += g;
      }
      if (chunks > 1) {
        a.scratch[c * a.n + j] = ds;
        a.scratch[(chunks + c) * a.n + j] = db;
        continue;
      }
      if (a.dScale)
        storeAs(a.dyType, a.dScale, j, ds);
      if (a.dBias)
        storeAs(a.dyType, a.dBias, j, db);
    }
  }
}

/// Each column's chunk sums from zero in order.
__global__ void layerNormGradParamsTotalKernel(LayerNormGradArgs a,
                                               int64_t chunks) {
  for (int64_t j = globalIndex(); j < a.n; j += globalStride()) {
    float ds = 0.0f, db = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      ds += a.scratch[c * a.n + j];
      db += a.scratch[(chunks + c) * a.n + j];
    }
    if (a.dScale)
      storeAs(a.dyType, a.dScale, j, ds);
    if (a.dBias)
      storeAs(a.dyType, a.dBias, j, db);
  }
}

unsigned rowGrid(int64_t rows) {
  int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return unsigned(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

} // namespace

void launchLayerNorm(DType t, const void *x, const void *scale,
                     const void *bias, void *y, float *mean, float *invStd,
                     int64_t outer, int64_t n, double epsilon, cudaStream_t s) {
  if (outer == 0)
    return;
  requireDeviceFloat(t, "LayerNormalization");
  layerNormKernel<<<rowGrid(outer), kBlock, 0, s>>>(t, x, scale, bias, y, mean,
                                                    invStd, outer, n, epsilon);
  MPC_CUDA_CHECK_LAUNCH("layerNormKernel");
}

size_t layerNormGradScratchBytes(const LayerNormGradArgs &a) {
  int64_t chunks = sumChunks(a.outer);
  if (!(a.dScale || a.dBias) || chunks <= 1)
    return 0;
  return size_t(2 * chunks * a.n) * sizeof(float);
}

void launchLayerNormGrad(const LayerNormGradArgs &a, cudaStream_t s) {
  for (DType t : {a.dyType, a.xType, a.scaleType, a.statType})
    requireDeviceFloat(t, "LayerNormalizationGrad");
  if (a.n == 0)
    return;
  if (a.dx && a.outer > 0) {
    layerNormGradInputKernel<<<rowGrid(a.outer), kBlock, 0, s>>>(a);
    MPC_CUDA_CHECK_LAUNCH("layerNormGradInputKernel");
  }
  if ((a.dScale || a.dBias) && a.outer > 0) {
    int64_t chunks = sumChunks(a.outer);
    if (chunks > 1 && !a.scratch)
      throw std::invalid_argument(
          "LayerNormalizationGrad: no scratch for the chunk sums");
    dim3 grid(gridFor(a.n), unsigned(chunks < 65535 ? chunks : 65535));
    layerNormGradParamsKernel<<<grid, kBlock, 0, s>>>(a, chunks);
    MPC_CUDA_CHECK_LAUNCH("layerNormGradParamsKernel");
    if (chunks > 1) {
      layerNormGradParamsTotalKernel<<<gridFor(a.n), kBlock, 0, s>>>(a, chunks);
      MPC_CUDA_CHECK_LAUNCH("layerNormGradParamsTotalKernel");
    }
  } else if (a.dScale || a.dBias) {
    // No rows: the sums are zero.
    if (a.dScale)
      MPC_CUDA_CHECK(
          cudaMemsetAsync(a.dScale, 0, size_t(a.n) * dtypeSize(a.dyType), s));
    if (a.dBias)
      MPC_CUDA_CHECK(
          cudaMemsetAsync(a.dBias, 0, size_t(a.n) * dtypeSize(a.dyType), s));
  }
}

} // namespace cuda
} // namespace mpc
