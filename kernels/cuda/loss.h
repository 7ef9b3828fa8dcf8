// Host entry points of the CUDA loss kernels (kernels/cuda/loss.cu):
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss forward and their
// mpc gradients.
//
// Scores / log-probabilities are [N, C, D] (D = the product of the trailing
// dims) of dtype fp32, fp16 or bf16, with fp32 math. Labels arrive already
// validated by the host (the CPU backend's lossSetup, so a bad label is the
// same error on both backends) as one int64 per position (n * D + d), -1
// where the label is ignore_index, with the position's weight w[label] as
// fp32 (0 where ignored). Reductions run in position order in one thread,
// the CPU backend's order, so sums of equal terms agree bit for bit.
#pragma once

#include "ir/host_device.h"
#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

enum class LossReduction { None, Sum, Mean };

struct LossShape {
  int64_t n = 0, c = 0, d = 0;
  MPC_HD int64_t positions() const { return n * d; }
};

/// logProb (nullable) := log_softmax over C; loss := per-position losses
/// (None: lossOut has N*D elements of dtype t) or their sum / weighted
/// mean (lossOut is one element). posLoss: fp32 scratch, one per position.
void launchSoftmaxCrossEntropy(DType t, const void *scores,
                               const int64_t *labels, const float *weights,
                               LossShape shape, LossReduction reduction,
                               void *logProb, float *posLoss, void *lossOut,
                               cudaStream_t stream);

/// dLogits := (exp(logProb) - onehot(label)) * w * s, s = dL / sum(w)
/// (Mean), dL (Sum) or dL[position] (None); dL is fp32 (one element, or
/// one per position for None); scale: one fp32 of scratch.
void launchSoftmaxCrossEntropyGrad(DType t, const float *dL,
                                   const void *logProb, const int64_t *labels,
                                   const float *weights, LossShape shape,
                                   LossReduction reduction, float *scale,
                                   void *dLogits, cudaStream_t stream);

/// NegativeLogLikelihoodLoss: the per-position loss -input[n, label, d] * w
/// (0 where ignored) reduced as launchSoftmaxCrossEntropy reduces it; input
/// is the [N, C, D] log-probabilities of dtype t.
void launchNegativeLogLikelihood(DType t, const void *input,
                                 const int64_t *labels, const float *weights,
                                 LossShape shape, LossReduction reduction,
                                 float *posLoss, void *lossOut,
                                 cudaStream_t stream);

/// dInput := -w * s at each position's label, 0 elsewhere and where
/// ignored; s as in launchSoftmaxCrossEntropyGrad.
void launchNegativeLogLikelihoodGrad(DType t, const float *dL,
                                     const int64_t *labels,
                                     const float *weights, LossShape shape,
                                     LossReduction reduction, float *scale,
                                     void *dInput, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
