// Host entry points of the CUDA comparison and selection kernels
// (kernels/cuda/compare.cu): Equal, Less, Greater, LessOrEqual,
// GreaterOrEqual and the logical And, Or, Xor with broadcasting, writing
// bool bytes, and Where.
//
// Comparisons are exact on both backends: floating operands compare as
// fp32 values (fp16/bf16 widen exactly), integer operands as int64. Where
// copies elements as bytes, so it takes any dtype. Raw device pointers.
#pragma once

#include "ir/types.h"
#include "kernels/cuda/broadcast_geometry.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

enum class CompareOp {
  Equal,
  Less,
  Greater,
  LessOrEqual,
  GreaterOrEqual,
  And, ///< the logical ops: bool operands only
  Or,
  Xor
};

/// Whether the comparison kernels take operands of dtype t (fp32, fp16,
/// bf16, int64, int32, and bool for Equal; the logical ops bool only).
bool compareSupported(CompareOp op, DType t);

/// y[i] := a[off_a(i)] op b[off_b(i)] as one bool byte; a and b of dtype t.
void launchCompare(CompareOp op, DType t, const void *a, const void *b,
                   uint8_t *y, const BroadcastGeometry<2> &geometry,
                   cudaStream_t stream);

/// y[i] := cond[off_c(i)] ? a[off_a(i)] : b[off_b(i)] for elements of
/// `elementSize` bytes (1, 2, 4 or 8).
void launchWhere(size_t elementSize, const uint8_t *cond, const void *a,
                 const void *b, void *y, const BroadcastGeometry<3> &geometry,
                 cudaStream_t stream);

} // namespace cuda
} // namespace mpc
