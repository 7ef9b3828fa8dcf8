// Host entry points of the CUDA LeakyRelu kernels (kernels/cuda/
// leaky_relu.cu): LeakyRelu and its gradient mpc.LeakyReluGrad.
//
// The per-element rules are kernels/common/piecewise_math.h's, the CPU
// kernels' own; fp16/bf16 compute in fp32 and round once on store. dtypes
// are fp32, fp16 or bf16 (others raise mpc::Error). Raw device pointers, as
// every kernel entry point takes; n == 0 launches nothing.
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// y[i] = leakyReluValue(x[i], alpha); x and y of dtype t.
void launchLeakyRelu(DType t, const void *x, void *y, int64_t n, float alpha,
                     cudaStream_t stream);

/// dx[i] = leakyReluGradValue(dy[i], x[i], alpha); dy/dx of dtype gradT, x
/// of dtype fwdT.
void launchLeakyReluGrad(DType gradT, const void *dy, DType fwdT, const void *x,
                         void *dx, int64_t n, float alpha, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
