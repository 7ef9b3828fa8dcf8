// Host entry point of the CUDA CumSum kernel (kernels/cuda/cumsum.cu).
//
// One thread per line along the axis runs kernels/common/cumsum_math.h's
// scan, the CPU kernel's, so the two backends agree bit for bit: fp32 sums
// for fp32, fp16 and bf16, wrapping int64 sums for int64 and int32.
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// Whether launchCumSum takes dtype t.
bool cumsumSupported(DType t);

/// y = CumSum(x) over the middle axis of [outer, len, inner].
void launchCumSum(DType t, const void *x, void *y, int64_t outer, int64_t len,
                  int64_t inner, bool exclusive, bool reverse,
                  cudaStream_t stream);

} // namespace cuda
} // namespace mpc
