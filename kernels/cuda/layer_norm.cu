// CUDA LayerNormalization kernels: one warp per row for the statistics and
// dX, one thread per column for dScale/dBias.
//
// The forward's statistics are two-pass in fp32 (mean, then squared
// deviations), combined across the warp in a fixed tree (warp_reduce.cuh);
// every per-element step is the shared formula of
// kernels/common/layer_norm_math.h. The column sums of the backward walk
// the rows in order, exactly as the CPU kernel accumulates them.
#include "kernels/common/layer_norm_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/warp_reduce.cuh"

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

__global__ void layerNormGradParamsKernel(LayerNormGradArgs a) {
  for (int64_t j = globalIndex(); j < a.n; j += globalStride()) {
    float ds = 0.0f, db = 0.0f;
    for (int64_t row = 0; row < a.outer; ++row) {
      float m = loadAs(a.statType, a.mean, row);
      float is = loadAs(a.statType, a.invStd, row);
      float g = loadAs(a.dyType, a.dy, row * a.n + j);
      ds += g * layerNormXhat(loadAs(a.xType, a.x, row * a.n + j), m, is);
      db += g;
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

void launchLayerNormGrad(const LayerNormGradArgs &a, cudaStream_t s) {
  for (DType t : {a.dyType, a.xType, a.scaleType, a.statType})
    requireDeviceFloat(t, "LayerNormalizationGrad");
  if (a.n == 0)
    return;
  if (a.dx && a.outer > 0) {
    layerNormGradInputKernel<<<rowGrid(a.outer), kBlock, 0, s>>>(a);
    MPC_CUDA_CHECK_LAUNCH("layerNormGradInputKernel");
  }
  if (a.dScale || a.dBias) {
    layerNormGradParamsKernel<<<gridFor(a.n), kBlock, 0, s>>>(a);
    MPC_CUDA_CHECK_LAUNCH("layerNormGradParamsKernel");
  }
}

} // namespace cuda
} // namespace mpc
