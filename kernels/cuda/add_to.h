// Host entry point of the CUDA mpc.AddTo kernel (kernels/cuda/add_to.cu):
// an fp32 add of two same-shape operands read as stored, stored in `to`,
// and optionally that cast down (ir/mpc_ops.h).
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// c[i] = to(float(a[i]) + float(b[i])); low[i] = lowT(c[i]) when low is
/// not nullptr. a, b, c of dtypes ta, tb, tc and low of lowT: fp32, fp16 or
/// bf16 (others raise mpc::Error). c may be a or b (in place: each element
/// is read before it is written). n == 0 launches nothing.
void launchAddTo(DType ta, const void *a, DType tb, const void *b, DType tc,
                 void *c, DType lowT, void *low, int64_t n,
                 cudaStream_t stream);

} // namespace cuda
} // namespace mpc
