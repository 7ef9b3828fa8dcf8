// Host entry points of the CUDA selection kernels (kernels/cuda/topk.cu):
// TopK, ArgMax and ArgMin along the middle axis of x seen as
// [outer, len, inner].
//
// Both order elements by kernels/common/select_math.h, the CPU kernels'
// rule (NaN above every number, ties to the lower index), so the backends
// select the same elements. ArgMax/ArgMin run one thread per line. TopK
// runs one thread per element, which counts the elements of its line that
// come before it: that count is its place in the sorted line, and an
// element placed below k writes itself there. No sort, no atomics, the same
// result as the CPU's partial sort; the work is len^2 per line, fine for
// the lines models select over (patches, tokens, classes).
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// Whether the selection kernels take dtype t (fp32, fp16, bf16, int32,
/// int64).
bool selectSupported(DType t);

/// y[(o, i)] := the index j of the largest (max) or smallest x[(o, j, i)],
/// the first one unless `last` (select_last_index). len >= 1.
void launchArgExtremum(DType t, const void *x, int64_t *y, int64_t outer,
                       int64_t len, int64_t inner, bool max, bool last,
                       cudaStream_t stream);

/// values[(o, r, i)], indices[(o, r, i)] for r < k: the element of line
/// (o, i) at place r of the order (largest first when `largest`) and its
/// index j. values may be nullptr (only the indices wanted), as may indices.
void launchTopK(DType t, const void *x, void *values, int64_t *indices,
                int64_t outer, int64_t len, int64_t inner, int64_t k,
                bool largest, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
