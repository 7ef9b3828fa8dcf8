// CUDA kernels of SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and
// their gradients.
//
// The forward runs one thread per position: the max, the sum of
// exponentials and the log-softmax in fp32, as kernels/cpu/loss.cpp does
// them (expf/logf are CUDA's, within an ulp or two of glibc's). The
// reduction over positions and the gradient's weight total are one thread
// each, in position order, so they add exactly what the CPU adds. The
// negative log-likelihood reads log-probabilities where the softmax cross
// entropy computes them and shares the reduction and the gradient's scale.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/loss.h"

namespace mpc {
namespace cuda {
namespace {

template <typename Io>
__global__ void sceForwardKernel(const typename Io::Storage *__restrict__ x,
                                 const int64_t *__restrict__ labels,
                                 const float *__restrict__ weights,
                                 LossShape sh,
                                 typename Io::Storage *__restrict__ logProb,
                                 float *__restrict__ posLoss,
                                 typename Io::Storage *__restrict__ lossNone) {
  for (int64_t pos = globalIndex(); pos < sh.positions();
       pos += globalStride()) {
    int64_t n = pos / sh.d, d = pos % sh.d;
    int64_t base = n * sh.c * sh.d + d;
    // std::max(mx, v) keeps mx unless mx < v: a NaN never wins.
    float mx = -INFINITY;
    for (int64_t c = 0; c < sh.c; ++c) {
      float v = Io::toFloat(x[base + c * sh.d]);
      mx = mx < v ? v : mx;
    }
    float sum = 0.0f;
    for (int64_t c = 0; c < sh.c; ++c)
      sum += expf(Io::toFloat(x[base + c * sh.d]) - mx);
    float logSum = logf(sum);
    if (logProb)
      for (int64_t c = 0; c < sh.c; ++c)
        logProb[base + c * sh.d] =
            Io::fromFloat(Io::toFloat(x[base + c * sh.d]) - mx - logSum);
    int64_t label = labels[pos];
    float l = 0.0f;
    if (label >= 0)
      l = -(Io::toFloat(x[base + label * sh.d]) - mx - logSum) * weights[pos];
    posLoss[pos] = l;
    if (lossNone)
      lossNone[pos] = Io::fromFloat(l);
  }
}

template <typename Io>
__global__ void sceReduceKernel(const float *__restrict__ posLoss,
                                const float *__restrict__ weights,
                                int64_t positions, bool mean,
                                typename Io::Storage *__restrict__ lossOut) {
  float total = 0.0f, totalWeight = 0.0f;
  for (int64_t p = 0; p < positions; ++p) {
    total += posLoss[p];
    totalWeight += weights[p];
  }
  *lossOut = Io::fromFloat(mean ? total / totalWeight : total);
}

__global__ void sceGradScaleKernel(const float *__restrict__ dL,
                                   const float *__restrict__ weights,
                                   int64_t positions, bool mean,
                                   float *__restrict__ scale) {
  float g = *dL;
  if (mean) {
    float total = 0.0f;
    for (int64_t p = 0; p < positions; ++p)
      total += weights[p];
    g = g / total;
  }
  *scale = g;
}

template <typename Io>
__global__ void sceGradKernel(const float *__restrict__ dL,
                              const typename Io::Storage *__restrict__ logProb,
                              const int64_t *__restrict__ labels,
                              const float *__restrict__ weights, LossShape sh,
                              bool perPosition, const float *__restrict__ scale,
                              typename Io::Storage *__restrict__ dx) {
  int64_t total = sh.n * sh.c * sh.d;
  for (int64_t k = globalIndex(); k < total; k += globalStride()) {
    int64_t d = k % sh.d, c = (k / sh.d) % sh.c, n = k / (sh.c * sh.d);
    int64_t pos = n * sh.d + d;
    int64_t label = labels[pos];
    float v = 0.0f;
    if (label >= 0) {
      float s = perPosition ? dL[pos] : *scale;
      float hot = c == label ? 1.0f : 0.0f;
      v = (expf(Io::toFloat(logProb[k])) - hot) * weights[pos] * s;
    }
    dx[k] = Io::fromFloat(v);
  }
}

template <typename Io>
__global__ void nllForwardKernel(const typename Io::Storage *__restrict__ x,
                                 const int64_t *__restrict__ labels,
                                 const float *__restrict__ weights,
                                 LossShape sh, float *__restrict__ posLoss,
                                 typename Io::Storage *__restrict__ lossNone) {
  for (int64_t pos = globalIndex(); pos < sh.positions();
       pos += globalStride()) {
    int64_t n = pos / sh.d, d = pos % sh.d;
    int64_t label = labels[pos];
    float l = 0.0f;
    if (label >= 0)
      l = -Io::toFloat(x[(n * sh.c + label) * sh.d + d]) * weights[pos];
    posLoss[pos] = l;
    if (lossNone)
      lossNone[pos] = Io::fromFloat(l);
  }
}

template <typename Io>
__global__ void nllGradKernel(const float *__restrict__ dL,
                              const int64_t *__restrict__ labels,
                              const float *__restrict__ weights, LossShape sh,
                              bool perPosition, const float *__restrict__ scale,
                              typename Io::Storage *__restrict__ dx) {
  int64_t total = sh.n * sh.c * sh.d;
  for (int64_t k = globalIndex(); k < total; k += globalStride()) {
    int64_t d = k % sh.d, c = (k / sh.d) % sh.c, n = k / (sh.c * sh.d);
    int64_t pos = n * sh.d + d;
    float v = 0.0f;
    if (labels[pos] == c) // never for an ignored position (-1)
      v = -weights[pos] * (perPosition ? dL[pos] : *scale);
    dx[k] = Io::fromFloat(v);
  }
}

/// The gradient's scale (none: per position, read in the kernel).
void launchGradScale(const float *dL, const float *weights, LossShape sh,
                     LossReduction reduction, float *scale, cudaStream_t s) {
  if (reduction == LossReduction::None)
    return;
  sceGradScaleKernel<<<1, 1, 0, s>>>(dL, weights, sh.positions(),
                                     reduction == LossReduction::Mean, scale);
  MPC_CUDA_CHECK_LAUNCH("sceGradScaleKernel");
}

/// The sum or weighted mean of the per-position losses (none: nothing).
template <typename Io>
void launchLossReduce(const float *posLoss, const float *weights, LossShape sh,
                      LossReduction reduction, void *lossOut, cudaStream_t s) {
  if (reduction == LossReduction::None)
    return;
  sceReduceKernel<Io><<<1, 1, 0, s>>>(
      posLoss, weights, sh.positions(), reduction == LossReduction::Mean,
      static_cast<typename Io::Storage *>(lossOut));
  MPC_CUDA_CHECK_LAUNCH("sceReduceKernel");
}

} // namespace

void launchSoftmaxCrossEntropy(DType t, const void *scores,
                               const int64_t *labels, const float *weights,
                               LossShape sh, LossReduction reduction,
                               void *logProb, float *posLoss, void *lossOut,
                               cudaStream_t s) {
  dispatchDeviceFloat(t, "SoftmaxCrossEntropyLoss", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    if (sh.positions() > 0) {
      sceForwardKernel<Io><<<gridFor(sh.positions()), kBlock, 0, s>>>(
          static_cast<const S *>(scores), labels, weights, sh,
          static_cast<S *>(logProb), posLoss,
          reduction == LossReduction::None ? static_cast<S *>(lossOut)
                                           : nullptr);
      MPC_CUDA_CHECK_LAUNCH("sceForwardKernel");
    }
    launchLossReduce<Io>(posLoss, weights, sh, reduction, lossOut, s);
  });
}

void launchSoftmaxCrossEntropyGrad(DType t, const float *dL,
                                   const void *logProb, const int64_t *labels,
                                   const float *weights, LossShape sh,
                                   LossReduction reduction, float *scale,
                                   void *dLogits, cudaStream_t s) {
  bool perPosition = reduction == LossReduction::None;
  launchGradScale(dL, weights, sh, reduction, scale, s);
  int64_t total = sh.n * sh.c * sh.d;
  if (total == 0)
    return;
  dispatchDeviceFloat(t, "SoftmaxCrossEntropyLossGrad", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    sceGradKernel<Io><<<gridFor(total), kBlock, 0, s>>>(
        dL, static_cast<const S *>(logProb), labels, weights, sh, perPosition,
        scale, static_cast<S *>(dLogits));
  });
  MPC_CUDA_CHECK_LAUNCH("sceGradKernel");
}

void launchNegativeLogLikelihood(DType t, const void *input,
                                 const int64_t *labels, const float *weights,
                                 LossShape sh, LossReduction reduction,
                                 float *posLoss, void *lossOut,
                                 cudaStream_t s) {
  dispatchDeviceFloat(t, "NegativeLogLikelihoodLoss", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    if (sh.positions() > 0) {
      nllForwardKernel<Io><<<gridFor(sh.positions()), kBlock, 0, s>>>(
          static_cast<const S *>(input), labels, weights, sh, posLoss,
          reduction == LossReduction::None ? static_cast<S *>(lossOut)
                                           : nullptr);
      MPC_CUDA_CHECK_LAUNCH("nllForwardKernel");
    }
    launchLossReduce<Io>(posLoss, weights, sh, reduction, lossOut, s);
  });
}

void launchNegativeLogLikelihoodGrad(DType t, const float *dL,
                                     const int64_t *labels,
                                     const float *weights, LossShape sh,
                                     LossReduction reduction, float *scale,
                                     void *dInput, cudaStream_t s) {
  launchGradScale(dL, weights, sh, reduction, scale, s);
  int64_t total = sh.n * sh.c * sh.d;
  if (total == 0)
    return;
  dispatchDeviceFloat(t, "NegativeLogLikelihoodLossGrad", [&](auto io) {
    using Io = decltype(io);
    nllGradKernel<Io><<<gridFor(total), kBlock, 0, s>>>(
        dL, labels, weights, sh, reduction == LossReduction::None, scale,
        static_cast<typename Io::Storage *>(dInput));
  });
  MPC_CUDA_CHECK_LAUNCH("nllGradKernel");
}

} // namespace cuda
} // namespace mpc
