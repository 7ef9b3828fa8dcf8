// Host entry point of the CUDA kernel of ONNX's training operators
// (kernels/cuda/preview_training.cu): Adagrad, Momentum and Adam of
// ai.onnx.preview.training on fp32 or fp64 tensors.
//
// R and T stay on the device: one thread per block computes the step's
// scalars from them (previewStep) and every thread applies the shared
// per-element update (previewUpdate), the CPU kernel's code, so nothing is
// read on the host and the results are the CPU's bits (Adam's bias
// correction aside, see kernels/common/preview_optimizer_math.h).
#pragma once

#include "ir/types.h"
#include "kernels/common/preview_optimizer_math.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// One tensor's runs: previewInputRuns(kind) inputs (X, G, state...) and
/// previewOutputRuns(kind) outputs (nullptr where the node omits one); n
/// elements each. Outputs may alias their inputs.
struct PreviewTensor {
  const void *in[4] = {};
  void *out[3] = {};
  int64_t n = 0;
};

/// Updates one tensor of dtype t (fp32 or fp64); r is the device learning
/// rate (a scalar of rType, fp32 or fp64), step the device int64 T.
void launchPreviewOptimizer(const PreviewHyper &hyper, DType t, const void *r,
                            DType rType, const int64_t *step,
                            const PreviewTensor &tensor, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
