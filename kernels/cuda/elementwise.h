// Host entry points of the CUDA elementwise kernels (kernels/cuda/
// elementwise.cu): unary math, Not, broadcasting binary arithmetic, Pow,
// ReluGrad and the broadcast copy Gemm's C operand needs.
//
// Every entry takes raw device pointers, element counts and a stream, never
// host Tensors, so the same kernels serve the staged backend of today and
// the device-resident arena of later. dtypes are fp32, fp16 or bf16 (others
// raise mpc::Error); fp16/bf16 compute in fp32 and round once on store, as
// the CPU backend does. n == 0 launches nothing.
#pragma once

#include "ir/types.h"
#include "kernels/cuda/broadcast_geometry.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

enum class UnaryOp {
  Relu,
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Tanh,
  Sigmoid,
  Erf,
  Sin,
  Cos,
  Floor,
  Ceil,
  Round,
  Sign
};
enum class BinaryOp { Add, Sub, Mul, Div };

/// IsNaN and IsInf (with ONNX's detect_negative/detect_positive): y[i] a
/// bool (one byte) per element of x of dtype t (fp32, fp16, bf16).
enum class FloatPredicate { IsNaN, IsInf };
void launchFloatPredicate(FloatPredicate p, bool negative, bool positive,
                          DType t, const void *x, uint8_t *y, int64_t n,
                          cudaStream_t stream);

/// y[i] = op(x[i]), x and y of dtype t.
void launchUnary(UnaryOp op, DType t, const void *x, void *y, int64_t n,
                 cudaStream_t stream);

/// y[i] = op(a[off_a(i)], b[off_b(i)]); a, b, y of dtype t.
void launchBinary(BinaryOp op, DType t, const void *a, const void *b, void *y,
                  const BroadcastGeometry<2> &geometry, cudaStream_t stream);

/// Pow with one exponent for every element, PyTorch's special cases
/// (chosen on the host from the exponent's value, like the CPU kernel).
enum class PowScalarMode {
  Square,       ///< v * v
  Cube,         ///< v * v * v
  Sqrt,         ///< sqrt(v)
  RSqrt,        ///< 1 / sqrt(v)
  Reciprocal,   ///< 1 / v
  ReciprocalSq, ///< 1 / (v * v)
  General,      ///< pow(v, e)
};
void launchPowScalar(DType t, const void *x, void *y, int64_t n,
                     PowScalarMode mode, float exponent, cudaStream_t stream);

/// Pow(X, Y) elementwise with broadcasting; Y of dtype yt (fp32, fp16,
/// bf16, int64 or int32) is converted to fp32 per element.
void launchPowBroadcast(DType xt, const void *x, DType yt, const void *e,
                        void *y, const BroadcastGeometry<2> &geometry,
                        cudaStream_t stream);

/// y[i] = !x[i] over bool bytes (any nonzero byte is true; 1 or 0 out).
void launchNot(const uint8_t *x, uint8_t *y, int64_t n, cudaStream_t stream);

/// dx[i] = y[i] > 0 ? dy[i] : 0; dy/dx of dtype gradT, y of dtype fwdT.
void launchReluGrad(DType gradT, const void *dy, DType fwdT, const void *y,
                    void *dx, int64_t n, cudaStream_t stream);

/// y[i] := y[i] * factor (fp32 math), in place; Gemm's beta * C when the
/// inner dimension is 0.
void launchScale(DType t, void *y, int64_t n, float factor,
                 cudaStream_t stream);

/// y[i] = x[off(i)] for elements of `elementSize` bytes (1, 2, 4 or 8):
/// Gemm's broadcast C operand, and Transpose with a permuted geometry
/// (makeTransposeGeometry).
void launchBroadcastCopy(size_t elementSize, const void *x, void *y,
                         const BroadcastGeometry<1> &geometry,
                         cudaStream_t stream);

} // namespace cuda
} // namespace mpc
