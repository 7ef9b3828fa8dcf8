// mpc's batch-norm kernels: the running-statistics update after cuDNN's
// training forward (one thread per channel) and the backward with given
// statistics (one thread per row for the partial sums, one per channel to
// add them in batch order, one per element for dX).
#include "kernels/cuda/batch_norm.h"
#include "kernels/cuda/batch_norm_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"

namespace mpc {
namespace cuda {
namespace {

__global__ void statsKernel(BatchNormStatsArgs a) {
  for (int64_t c = globalIndex(); c < a.channels; c += globalStride()) {
    float mean = a.batchMean[c], unbiased = a.batchVarUnbiased[c];
    if (a.runMean)
      storeAs(a.statType, a.runMean, c,
              batchNormRunning(a.inMean[c], mean, a.momentum));
    if (a.runVar)
      storeAs(a.statType, a.runVar, c,
              batchNormRunning(a.inVar[c], unbiased, a.momentum));
    if (a.savedMean)
      storeAs(a.statType, a.savedMean, c, mean);
    if (a.savedVar)
      storeAs(a.statType, a.savedVar, c, batchNormBiasedVar(unbiased, a.count));
  }
}

__global__ void gradGivenRowsKernel(BatchNormGradGivenArgs a) {
  int64_t rows = a.n * a.channels;
  for (int64_t r = globalIndex(); r < rows; r += globalStride()) {
    int64_t c = r % a.channels, base = r * a.inner;
    auto dy = [&](int64_t i) { return loadAs(a.dyType, a.dy, base + i); };
    auto x = [&](int64_t i) { return loadAs(a.xType, a.x, base + i); };
    batchNormGivenRowSums(dy, x, a.inner, a.mean[c],
                          batchNormInvStd(a.var[c], a.epsilon), a.rowSumDy[r],
                          a.rowSumDyXhat[r]);
  }
}

__global__ void gradGivenChannelsKernel(BatchNormGradGivenArgs a) {
  for (int64_t c = globalIndex(); c < a.channels; c += globalStride()) {
    // The rows in batch order, as the CPU adds them.
    float sumDy = 0.0f, sumDyXhat = 0.0f;
    for (int64_t n = 0; n < a.n; ++n) {
      sumDy += a.rowSumDy[n * a.channels + c];
      sumDyXhat += a.rowSumDyXhat[n * a.channels + c];
    }
    if (a.dScale)
      storeAs(a.paramType, a.dScale, c, sumDyXhat);
    if (a.dBias)
      storeAs(a.paramType, a.dBias, c, sumDy);
  }
}

__global__ void gradGivenInputKernel(BatchNormGradGivenArgs a) {
  int64_t total = a.n * a.channels * a.inner;
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    int64_t c = (i / a.inner) % a.channels;
    storeAs(a.dyType, a.dx, i,
            batchNormGivenDx(a.scale[c], batchNormInvStd(a.var[c], a.epsilon),
                             loadAs(a.dyType, a.dy, i)));
  }
}

} // namespace

void launchBatchNormStats(const BatchNormStatsArgs &a, cudaStream_t stream) {
  requireDeviceFloat(a.statType, "batch-norm statistics");
  if (a.channels == 0)
    return;
  statsKernel<<<gridFor(a.channels), kBlock, 0, stream>>>(a);
  MPC_CUDA_CHECK_LAUNCH("statsKernel");
}

void launchBatchNormGradGiven(const BatchNormGradGivenArgs &a,
                              cudaStream_t stream) {
  requireDeviceFloat(a.dyType, "BatchNormalizationGrad dY");
  requireDeviceFloat(a.xType, "BatchNormalizationGrad X");
  requireDeviceFloat(a.paramType, "BatchNormalizationGrad scale");
  int64_t rows = a.n * a.channels;
  if ((a.dScale || a.dBias) && a.channels > 0) {
    if (rows > 0) {
      gradGivenRowsKernel<<<gridFor(rows), kBlock, 0, stream>>>(a);
      MPC_CUDA_CHECK_LAUNCH("gradGivenRowsKernel");
    }
    gradGivenChannelsKernel<<<gridFor(a.channels), kBlock, 0, stream>>>(a);
    MPC_CUDA_CHECK_LAUNCH("gradGivenChannelsKernel");
  }
  int64_t total = rows * a.inner;
  if (a.dx && total > 0) {
    gradGivenInputKernel<<<gridFor(total), kBlock, 0, stream>>>(a);
    MPC_CUDA_CHECK_LAUNCH("gradGivenInputKernel");
  }
}

} // namespace cuda
} // namespace mpc
