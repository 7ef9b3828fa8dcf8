// Host entry point of the CUDA SumToShape kernel (kernels/cuda/reduce.cu):
// the gradient of a broadcast, summing dY back onto the operand's shape.
#pragma once

#include "kernels/cuda/broadcast_geometry.h"
#include "passes/ir/types.h"

#include <cuda_runtime_api.h>

namespace mpc {
namespace cuda {

/// dx (geometry.outCount elements) := sums of dy over the broadcast axes,
/// accumulated in fp32 in dY's row-major order; dy and dx of dtype t.
void launchSumToShape(DType t, const void *dy, void *dx,
                      const SumToShapeGeometry &geometry, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
