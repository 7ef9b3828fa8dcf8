// Host entry points of the CUDA log-sigmoid kernels (kernels/cuda/
// log_sigmoid.cu): mpc.LogSigmoid and its gradient mpc.LogSigmoidGrad, with
// the formulas of kernels/common/log_sigmoid_math.h (the CPU backend's).
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// y := log(sigmoid(x)); x and y of dtype t.
void launchLogSigmoid(DType t, const void *x, void *y, int64_t n,
                      cudaStream_t stream);

/// dx := dy * sigmoid(-x); dy and dx of dtype gradT, x of dtype fwdT.
void launchLogSigmoidGrad(DType gradT, const void *dy, DType fwdT,
                          const void *x, void *dx, int64_t n,
                          cudaStream_t stream);

} // namespace cuda
} // namespace mpc
