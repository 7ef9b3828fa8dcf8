// Host entry point of the CUDA Cast kernel (kernels/cuda/cast.cu).
//
// Converts n elements between fp32, fp16, bf16 and bool (the same dtype is
// a device copy; bool is 1 or 0, and any non-zero float is true), and int64
// or int32 to fp32 (nearest-even, as the CPU's float(v)), with the CPU
// backend's rounding: through fp32, round to nearest-even on store
// (ir/half.h), NaN kept quiet. Raw device pointers, as every kernel
// entry point takes.
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// Whether launchCast takes this pair (fp32/fp16/bf16 and bool, both ways;
/// int64/int32/fp64 to fp32).
bool castSupported(DType from, DType to);

void launchCast(DType from, DType to, const void *x, void *y, int64_t n,
                cudaStream_t stream);

} // namespace cuda
} // namespace mpc
