// Host entry points of the CUDA softmax kernels (kernels/cuda/softmax.cu):
// Softmax / LogSoftmax along one axis and their gradients (mpc.SoftmaxGrad,
// mpc.LogSoftmaxGrad), and mpc.SoftmaxTo / mpc.SoftmaxGradAs, which read a
// narrower operand as stored, and mpc.SoftmaxGradDiv.
//
// A tensor is seen as rows around the axis ([outer, len, inner], element j
// of row (o, i) at (o * len + j) * inner + i); one warp takes one row, with
// fp32 statistics whatever the storage type (kernels/common/softmax_math.h
// holds the formulas, shared with the CPU backend). Raw device pointers;
// dtypes fp32, fp16 or bf16.
#pragma once

#include "ir/host_device.h"
#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

struct AxisRows {
  int64_t outer = 1, len = 1, inner = 1;
  MPC_HD int64_t rows() const { return outer * inner; }
};

/// y := softmax (or log-softmax) of x along the axis; x of dtype inT, y of
/// outT: inT, or fp32 for a softmax of a narrower x (mpc.SoftmaxTo, x
/// widened exactly). A softmax may take a `divisor` (device pointer to one
/// inT element, mpc.DivSoftmaxTo): x / divisor, rounded to inT, is used;
/// and an fp32 softmax may also write `ylow`, y cast to lowT (fp16 or bf16;
/// their optional Ylow).
void launchSoftmax(bool log, DType inT, const void *x, DType outT, void *y,
                   const AxisRows &rows, cudaStream_t stream,
                   const void *divisor = nullptr, DType lowT = DType::F16,
                   void *ylow = nullptr);

/// dx := SoftmaxGrad (Y * (dY - sum(dY * Y))) or LogSoftmaxGrad
/// (dY - exp(Y) * sum(dY)); dy of dtype gradT, y of dtype fwdT, dx of
/// outT: gradT, or fwdT for mpc.SoftmaxGradAs (not log).
void launchSoftmaxGrad(bool log, DType gradT, const void *dy, DType fwdT,
                       const void *y, DType outT, void *dx,
                       const AxisRows &rows, cudaStream_t stream);

/// dx := mpc.SoftmaxGradDiv: SoftmaxGrad of dy (dtype gradT, widened) and
/// the fp32 y, divided by the fp32 *d (a device pointer) and written as
/// outT (fp32, fp16 or bf16).
void launchSoftmaxGradDiv(DType gradT, const void *dy, const float *y,
                          const float *d, DType outT, void *dx,
                          const AxisRows &rows, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
