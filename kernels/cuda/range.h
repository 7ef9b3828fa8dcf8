// Host entry point of the CUDA Range kernel (kernels/cuda/range.cu).
//
// Writes the sequence kernels/cpu/node_geometry.h's RangeSpec describes:
// element i is start + i * delta, in int64 for integer dtypes and in double
// for floating ones, then stored in the dtype exactly as the CPU kernel's
// Tensor::setFromDouble stores it (so the two backends agree bit for bit).
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// Whether launchRange writes dtype t (int64, int32, fp64, fp32, fp16,
/// bf16).
bool rangeSupported(DType t);

/// y[i] for i < n; startInt/deltaInt for integer t, start/delta otherwise.
void launchRange(DType t, void *y, int64_t n, double start, double delta,
                 int64_t startInt, int64_t deltaInt, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
