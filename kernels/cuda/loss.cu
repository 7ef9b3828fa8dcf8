// CUDA kernels of SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and
// their gradients.
//
// The forward runs one warp per position: for the softmax cross entropy
// the max, the sum of exponentials and the log-softmax in fp32 with the
// formulas of kernels/common/softmax_math.h, as kernels/cpu/loss.cpp does
// them (expf/logf are CUDA's, within an ulp or two of glibc's, and the sum is
// the warp's fixed tree, not the CPU's index order: the tests compare with a
// tolerance); the negative log-likelihood reads the log-probabilities it is
// given (subtracting a max and a log-sum of 0 leaves every value as it is, so
// one kernel serves both). The reduction over positions and the gradient's
// weight total are one block each in the chunked order of ordered_sum.cuh:
// the CPU's position order, bit for bit, up to kSumChunk (64) positions;
// beyond, the same bits on every run, within rounding (about 1e-7
// relative) of the CPU's sum.
#include "kernels/common/softmax_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/ordered_sum.cuh"
#include "kernels/cuda/warp_reduce.cuh"

namespace mpc {
namespace cuda {
namespace {

/// One warp per position: the lanes take the classes in turn for the max
/// and the sum of exponentials (combined in warp_reduce.cuh's fixed tree)
/// and write the log-probabilities; lane 0 writes the position's loss.
template <typename Io, bool Softmax>
__global__ void lossForwardKernel(const typename Io::Storage *__restrict__ x,
                                  const int64_t *__restrict__ labels,
                                  const float *__restrict__ weights,
                                  LossShape sh,
                                  typename Io::Storage *__restrict__ logProb,
                                  float *__restrict__ posLoss,
                                  typename Io::Storage *__restrict__ lossNone) {
  unsigned lane = threadIdx.x % kWarp;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t pos = globalIndex() / kWarp; pos < sh.positions();
       pos += warps) {
    int64_t n = pos / sh.d, d = pos % sh.d;
    int64_t base = n * sh.c * sh.d + d;
    float mx = 0.0f, logSum = 0.0f;
    if (Softmax) {
      // softmaxMax keeps mx unless mx < v: a NaN never wins.
      float m = -INFINITY;
      for (int64_t c = lane; c < sh.c; c += kWarp)
        m = softmaxMax(m, Io::toFloat(x[base + c * sh.d]));
      mx = warpMax(m);
      float sum = 0.0f;
      for (int64_t c = lane; c < sh.c; c += kWarp)
        sum += softmaxExpTerm(Io::toFloat(x[base + c * sh.d]), mx);
      logSum = logOf(warpSum(sum));
      if (logProb)
        for (int64_t c = lane; c < sh.c; c += kWarp)
          logProb[base + c * sh.d] = Io::fromFloat(
              logSoftmaxValue(Io::toFloat(x[base + c * sh.d]), mx, logSum));
    }
    if (lane != 0)
      continue;
    int64_t label = labels[pos];
    float l = 0.0f;
    if (label >= 0)
      l = -logSoftmaxValue(Io::toFloat(x[base + label * sh.d]), mx, logSum) *
          weights[pos];
    posLoss[pos] = l;
    if (lossNone)
      lossNone[pos] = Io::fromFloat(l);
  }
}

/// The sum (or weighted mean) of the per-position losses: one block,
/// ordered_sum.cuh's chunked order (the CPU's index order up to kSumChunk
/// positions).
template <typename Io>
__global__ void __launch_bounds__(kOrderedSumBlock)
    lossReduceKernel(const float *__restrict__ posLoss,
                     const float *__restrict__ weights, int64_t positions,
                     bool mean, typename Io::Storage *__restrict__ lossOut) {
  __shared__ float staged[kOrderedSumBlock];
  float total = blockChunkedSum(
      positions, [&](int64_t p) { return posLoss[p]; }, staged);
  float totalWeight = 0.0f;
  if (mean)
    totalWeight = blockChunkedSum(
        positions, [&](int64_t p) { return weights[p]; }, staged);
  if (threadIdx.x == 0)
    *lossOut = Io::fromFloat(mean ? total / totalWeight : total);
}

/// The gradient's scale: dL, over the weight total for a mean (one block,
/// the same order as lossReduceKernel's total).
__global__ void __launch_bounds__(kOrderedSumBlock)
    gradScaleKernel(const float *__restrict__ dL,
                    const float *__restrict__ weights, int64_t positions,
                    bool mean, float *__restrict__ scale) {
  __shared__ float staged[kOrderedSumBlock];
  if (!mean) {
    if (threadIdx.x == 0)
      *scale = *dL;
    return;
  }
  float total = blockChunkedSum(
      positions, [&](int64_t p) { return weights[p]; }, staged);
  if (threadIdx.x == 0)
    *scale = *dL / total;
}

/// The softmax cross entropy's gradient is (exp(logProb) - onehot) * w * s,
/// the negative log-likelihood's -w * s at the label and 0 elsewhere.
template <typename Io, bool Softmax>
__global__ void lossGradKernel(const float *__restrict__ dL,
                               const typename Io::Storage *__restrict__ logProb,
                               const int64_t *__restrict__ labels,
                               const float *__restrict__ weights, LossShape sh,
                               bool perPosition,
                               const float *__restrict__ scale,
                               typename Io::Storage *__restrict__ dx) {
  int64_t total = sh.n * sh.c * sh.d;
  for (int64_t k = globalIndex(); k < total; k += globalStride()) {
    int64_t d = k % sh.d, c = (k / sh.d) % sh.c, n = k / (sh.c * sh.d);
    int64_t pos = n * sh.d + d;
    int64_t label = labels[pos];
    float v = 0.0f;
    if (label >= 0) {
      float s = perPosition ? dL[pos] : *scale;
      if (Softmax) {
        float hot = c == label ? 1.0f : 0.0f;
        v = (expf(Io::toFloat(logProb[k])) - hot) * weights[pos] * s;
      } else if (c == label) {
        v = -weights[pos] * s;
      }
    }
    dx[k] = Io::fromFloat(v);
  }
}

/// Per-position losses, then their sum or weighted mean (none: the
/// per-position losses are the output).
template <bool Softmax>
void launchLossForward(DType t, const char *what, const void *x,
                       const int64_t *labels, const float *weights,
                       LossShape sh, LossReduction reduction, void *logProb,
                       float *posLoss, void *lossOut, cudaStream_t s) {
  dispatchDeviceFloat(t, what, [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    if (sh.positions() > 0) {
      lossForwardKernel<Io, Softmax>
          <<<gridFor(sh.positions() * kWarp), kBlock, 0, s>>>(
              static_cast<const S *>(x), labels, weights, sh,
              static_cast<S *>(logProb), posLoss,
              reduction == LossReduction::None ? static_cast<S *>(lossOut)
                                               : nullptr);
      MPC_CUDA_CHECK_LAUNCH("lossForwardKernel");
    }
    if (reduction != LossReduction::None) {
      lossReduceKernel<Io><<<1, kOrderedSumBlock, 0, s>>>(
          posLoss, weights, sh.positions(), reduction == LossReduction::Mean,
          static_cast<S *>(lossOut));
      MPC_CUDA_CHECK_LAUNCH("lossReduceKernel");
    }
  });
}

/// The gradient's scale (none: dL per position, read by the kernel), then
/// the gradient.
template <bool Softmax>
void launchLossGrad(DType t, const char *what, const float *dL,
                    const void *logProb, const int64_t *labels,
                    const float *weights, LossShape sh, LossReduction reduction,
                    float *scale, void *dx, cudaStream_t s) {
  bool perPosition = reduction == LossReduction::None;
  if (!perPosition) {
    gradScaleKernel<<<1, kOrderedSumBlock, 0, s>>>(
        dL, weights, sh.positions(), reduction == LossReduction::Mean, scale);
    MPC_CUDA_CHECK_LAUNCH("gradScaleKernel");
  }
  int64_t total = sh.n * sh.c * sh.d;
  if (total == 0)
    return;
  dispatchDeviceFloat(t, what, [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    lossGradKernel<Io, Softmax><<<gridFor(total), kBlock, 0, s>>>(
        dL, static_cast<const S *>(logProb), labels, weights, sh, perPosition,
        scale, static_cast<S *>(dx));
  });
  MPC_CUDA_CHECK_LAUNCH("lossGradKernel");
}

} // namespace

void launchSoftmaxCrossEntropy(DType t, const void *scores,
                               const int64_t *labels, const float *weights,
                               LossShape sh, LossReduction reduction,
                               void *logProb, float *posLoss, void *lossOut,
                               cudaStream_t s) {
  launchLossForward<true>(t, "SoftmaxCrossEntropyLoss", scores, labels, weights,
                          sh, reduction, logProb, posLoss, lossOut, s);
}

void launchSoftmaxCrossEntropyGrad(DType t, const float *dL,
                                   const void *logProb, const int64_t *labels,
                                   const float *weights, LossShape sh,
                                   LossReduction reduction, float *scale,
                                   void *dLogits, cudaStream_t s) {
  launchLossGrad<true>(t, "SoftmaxCrossEntropyLossGrad", dL, logProb, labels,
                       weights, sh, reduction, scale, dLogits, s);
}

void launchNegativeLogLikelihood(DType t, const void *input,
                                 const int64_t *labels, const float *weights,
                                 LossShape sh, LossReduction reduction,
                                 float *posLoss, void *lossOut,
                                 cudaStream_t s) {
  launchLossForward<false>(t, "NegativeLogLikelihoodLoss", input, labels,
                           weights, sh, reduction, nullptr, posLoss, lossOut,
                           s);
}

void launchNegativeLogLikelihoodGrad(DType t, const float *dL,
                                     const int64_t *labels,
                                     const float *weights, LossShape sh,
                                     LossReduction reduction, float *scale,
                                     void *dInput, cudaStream_t s) {
  launchLossGrad<false>(t, "NegativeLogLikelihoodLossGrad", dL, nullptr, labels,
                        weights, sh, reduction, scale, dInput, s);
}

} // namespace cuda
} // namespace mpc
