// Host entry points of the CUDA reduction kernels (kernels/cuda/reduce.cu):
// SumToShape (the gradient of a broadcast), ReduceSum / ReduceMean /
// ReduceMax over any axes, mpc.ReduceGrad (the reduction's gradient, a
// broadcast back) and mpc.ReduceExtremumGrad (ReduceMax's / ReduceMin's
// gradient).
//
// Sums accumulate in fp32 in the input's row-major order, the CPU backend's
// order, so they are the same bits on both backends: SumToShape in chunks
// (kernels/common/chunked_sum.h) summed in parallel, the others one thread
// per output element. Raw device pointers; dtypes fp32, fp16, bf16.
#pragma once

#include "ir/types.h"
#include "kernels/cuda/broadcast_geometry.h"

#include <cuda_runtime_api.h>

namespace mpc {
namespace cuda {

/// Device scratch a SumToShape of this geometry needs: the chunk sums
/// (kernels/common/chunked_sum.h), fp32; 0 for a sum of one chunk.
size_t sumToShapeScratchBytes(const SumToShapeGeometry &geometry);

/// dx (geometry.outCount elements) := sums of dy over the broadcast axes,
/// accumulated in fp32 in dY's row-major order in chunks of kSumChunk terms
/// (the CPU backend's order); dy and dx of dtype t. `scratch` holds
/// sumToShapeScratchBytes(geometry) bytes.
void launchSumToShape(DType t, const void *dy, void *dx,
                      const SumToShapeGeometry &geometry, void *scratch,
                      cudaStream_t stream);

/// mpc.SumToShapeAs: the same sums of dy (dtype dyType) written as dxType
/// (fp32 for an fp16/bf16 dy: each element widened exactly, summed in fp32).
void launchSumToShapeAs(DType dyType, const void *dy, DType dxType, void *dx,
                        const SumToShapeGeometry &geometry, void *scratch,
                        cudaStream_t stream);

/// out[o] (outType) := chunkSums[j * sums + o] added from zero in order
/// over j < chunks: the second pass of a chunked sum (chunked_sum.h), for
/// SumToShape and LayerNormalizationGrad's dScale/dBias.
void launchAddChunkSums(const float *chunkSums, int64_t chunks, int64_t sums,
                        DType outType, void *out, cudaStream_t stream);

enum class ReduceKind { Sum, Mean, Max };

/// y (geometry.outCount elements) := the sum, mean or maximum of x over the
/// reduced axes (geometry from makeSumToShapeGeometry(x dims, kept dims)).
/// A mean over no elements is 0/0 (NaN) and a maximum -inf, as on the CPU;
/// a NaN wins a maximum.
void launchReduce(ReduceKind kind, DType t, const void *x, void *y,
                  const SumToShapeGeometry &geometry, cudaStream_t stream);

/// dx[i] := dy[off(i)] (divided by `count` when mean), dy broadcast over
/// X's shape (geometry from makeBroadcastGeometry<1>(X dims, {kept dims})).
void launchReduceGrad(DType t, const void *dy, void *dx,
                      const BroadcastGeometry<1> &geometry, bool mean,
                      int64_t count, cudaStream_t stream);

/// ReduceExtremumGrad: dx (X's shape, dtype dyType) := dy[group] / ties at
/// the elements of X equal to their group's y, 0 elsewhere; ties counts
/// those elements (compared and divided in fp32, as the CPU kernel does).
/// The geometry is makeSumToShapeGeometry(X dims, kept dims): one group
/// per output element; dy and y hold one element per group.
void launchReduceExtremumGrad(DType dyType, const void *dy, DType xType,
                              const void *x, DType yType, const void *y,
                              void *dx, const SumToShapeGeometry &geometry,
                              cudaStream_t stream);

} // namespace cuda
} // namespace mpc
