// Host entry points of the CUDA GELU kernels (kernels/cuda/gelu.cu): Gelu
// (erf form or tanh approximation) and the backward ops mpc.GeluGrad and
// mpc.ErfGrad, with the formulas of kernels/common/gelu_math.h (the CPU
// backend's).
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// y := Gelu(x); x and y of dtype t.
void launchGelu(DType t, const void *x, void *y, int64_t n, bool tanhForm,
                cudaStream_t stream);

enum class GeluGradKind { Gelu, GeluTanh, Erf };

/// dx := dy * Gelu'(x) (Gelu, GeluTanh) or dy * 2/sqrt(pi) * exp(-x^2)
/// (Erf); dy and dx of dtype gradT, x of dtype fwdT.
void launchGeluGrad(GeluGradKind kind, DType gradT, const void *dy, DType fwdT,
                    const void *x, void *dx, int64_t n, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
