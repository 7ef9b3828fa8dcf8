// Host entry points of the CUDA Clip and variadic kernels (kernels/cuda/
// clip_variadic.cu): Clip, Max/Min/Sum over any number of
// broadcasting inputs, and their gradients.
//
// The per-element rules are kernels/common/piecewise_math.h's, the CPU
// kernels' own; fp16/bf16 compute in fp32 and round once on store. dtypes
// are fp32, fp16 or bf16 (others raise mpc::Error), and for Clip, Max, Min
// and Sum also the CPU's other numeric dtypes (piecewiseNumeric). Raw device
// pointers, as every kernel entry point takes; n == 0 launches nothing.
#pragma once

#include "ir/types.h"
#include "kernels/cuda/broadcast_geometry.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// One bound of Clip or ClipGrad: a single element on the device (read by
/// the kernel, so a bound computed during a device-resident step works), or
/// a value known on the host (an attribute), or absent.
struct ClipBound {
  const void *element = nullptr; ///< device element of dtype `dtype`
  DType dtype = DType::F32;
  bool present = false; ///< with element == nullptr: `value` bounds
  float value = 0;
};

/// Whether Clip, Max, Min and Sum take dtype t on the device: fp32, fp16,
/// bf16, fp64, int64, int32, int8, uint8 (what the CPU kernels take).
bool piecewiseNumeric(DType t);

/// y[i] = clipValue(x[i], lo, hi); x, y and the device bounds of dtype t
/// (piecewiseNumeric).
void launchClip(DType t, const void *x, void *y, int64_t n, ClipBound lo,
                ClipBound hi, cudaStream_t stream);

/// dx[i] = clipGradValue(dy[i], x[i], lo, hi), an absent bound being
/// -inf/+inf; dy/dx of dtype gradT, x of dtype fwdT.
void launchClipGrad(DType gradT, const void *dy, DType fwdT, const void *x,
                    void *dx, int64_t n, ClipBound lo, ClipBound hi,
                    cudaStream_t stream);

/// Operand k of a variadic kernel: where it is, its dtype and how it
/// broadcasts to the output. Only 8-byte fields, so a table of them has no
/// padding (NodeStaging::upload compares tables byte for byte between the
/// steps of a captured CUDA graph).
struct VariadicOperand {
  const void *data = nullptr;
  int64_t dtype = 0; ///< a DType
  int64_t full = 0;  ///< 1: the output's element count, read at i
  int64_t strides[kMaxKernelRank] = {}; ///< else: 0 on broadcast dims
};

/// The output shape the operands broadcast to.
struct VariadicShape {
  int64_t count = 0;
  int64_t rank = 0;
  int64_t dims[kMaxKernelRank] = {};
};

/// The operand of `data` (of dtype t and shape `in`) broadcast to `out`
/// (the caller has checked that it broadcasts and the rank).
VariadicOperand variadicOperand(const void *data, DType t,
                                const std::vector<int64_t> &in,
                                const std::vector<int64_t> &out);
VariadicShape makeVariadicShape(const std::vector<int64_t> &out);

enum class VariadicFold { Max, Min, Sum };

/// y[i] = the fold of operand 0..count-1 at i, in operand order (NaN wins
/// in Max and Min: extremumFold; integers wrap in Sum: sumFold); every
/// operand of dtype t (piecewiseNumeric). `operands` is
/// a device table of `count` entries.
void launchVariadic(VariadicFold fold, DType t, const VariadicOperand *operands,
                    int count, void *y, const VariadicShape &shape,
                    cudaStream_t stream);

/// ExtremumGrad: dx[i] = extremumGradShare(dy[i], x_index == y, ties) with
/// ties the count of operands equal to y[i]; dy/dx of dtype gradT, y of
/// dtype fwdT, each operand of its own fp32/fp16/bf16 dtype.
void launchExtremumGrad(DType gradT, const void *dy, DType fwdT, const void *y,
                        const VariadicOperand *operands, int count, int index,
                        void *dx, const VariadicShape &shape,
                        cudaStream_t stream);

} // namespace cuda
} // namespace mpc
