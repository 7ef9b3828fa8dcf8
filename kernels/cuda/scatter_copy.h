// Host entry point of the strided scatter copy (kernels/cuda/scatter_copy.cu):
// the inverse of launchBroadcastCopy, for mpc.SliceGrad.
//
// Element i of the source (row-major over the geometry's dims) is written to
// the destination at the geometry's offset of i. The caller guarantees that
// no two elements land on one offset (a Slice reads each position at most
// once), so the copy needs no atomics and is exact for any dtype.
#pragma once

#include "kernels/cuda/broadcast_geometry.h"

#include <cuda_runtime_api.h>

#include <cstddef>

namespace mpc {
namespace cuda {

/// y[off(i)] := x[i] for the geometry.count elements of `elementSize` bytes
/// (1, 2, 4 or 8); the other elements of y are left as they are.
void launchScatterCopy(size_t elementSize, const void *x, void *y,
                       const BroadcastGeometry<1> &geometry,
                       cudaStream_t stream);

} // namespace cuda
} // namespace mpc
