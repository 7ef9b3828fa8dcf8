// Host entry points of the CUDA optimizer kernels (kernels/cuda/
// optimizer.cu): loss-scale unscale + found-inf, the scale update, the fused
// SGD and Adam/AdamW updates and the step counter.
//
// None of them needs the host to look at a device value: the unscale kernel
// writes found_inf on the device, and every later kernel reads that flag
// there and skips its update, so a step can run (and later be captured as a
// CUDA graph) without a synchronisation. The per-element math is the shared
// MPC_HD code of kernels/common/{loss_scale_math.h,optimizer_math.h}, the
// CPU backend's, so both compute identical bits. Raw device pointers;
// `foundInf` may be nullptr (never skip). SGD's momentum buffer and Adam's
// moments are fp32 (float *) or bf16 (uint16_t *, the bit patterns;
// --optimizer-state-dtype=bf16): one overload each, the same update.
#pragma once

#include "ir/types.h"
#include "kernels/common/lr_schedule_math.h"
#include "kernels/common/optimizer_math.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// One gradient of the multi-tensor unscale: n elements of dtype (fp32,
/// fp16 or bf16) at src, written as fp32 to dst (nullptr: checked only).
struct UnscaleTensor {
  const void *src = nullptr;
  float *dst = nullptr;
  int64_t n = 0;
  DType dtype = DType::F32;
  /// Spelled out and zeroed: an uploaded table has no padding bytes
  /// (NodeStaging::upload compares tables byte for byte).
  uint8_t unused[7] = {};
};

/// Elements one block of the multi-tensor kernels covers.
constexpr int64_t kUnscaleChunk = 16384;

/// One block's work: elements [begin, begin + kUnscaleChunk) of a tensor.
struct UnscaleChunk {
  int32_t tensor = 0;
  int32_t unused = 0; ///< no padding bytes in an uploaded table
  int64_t begin = 0;
};

/// The chunks covering every element of `tensors` (empty tensors have none).
std::vector<UnscaleChunk>
unscaleChunks(const std::vector<UnscaleTensor> &tensors);

/// found_inf := some element of some gradient is inf/NaN; every dst :=
/// src * float(1 / double(*scale)), checked before the multiply as torch
/// does. `tensors` and `chunks` are device copies (the caller uploads the
/// host tables). foundInf is one byte (bool).
void launchUnscaleGradients(const float *scale, const UnscaleTensor *tensors,
                            const UnscaleChunk *chunks, int64_t numChunks,
                            uint8_t *foundInf, cudaStream_t stream);

/// torch's _amp_update_scale_ on one fp32 scale and an int64 or int32
/// tracker; outputs may alias inputs. trackerOut may be nullptr.
void launchUpdateLossScale(const float *scale, const void *tracker,
                           bool tracker64, const uint8_t *foundInf,
                           float *scaleOut, void *trackerOut,
                           double growthFactor, double backoffFactor,
                           int64_t growthInterval, cudaStream_t stream);

/// An SGD/Adam gradient: fp32, or fp16/bf16 (fold-widening-casts leaves the
/// products' gradients in their storage type), widened exactly as it is
/// read, so the update is the one of its fp32 Cast. A float pointer is an
/// fp32 gradient. `scale`, when given, is the device's loss scale the
/// gradient is unscaled by as it is read (mpc.SGD's / mpc.Adam's
/// grad_scale, passes/fold_unscale.h): UnscaleGradients' multiply.
struct GradientIn {
  const void *data = nullptr;
  DType type = DType::F32;
  const float *scale = nullptr;
  GradientIn() = default;
  GradientIn(const float *g) : data(g) {} // NOLINT: fp32 is the common case
  GradientIn(const void *g, DType t, const float *scale = nullptr)
      : data(g), type(t), scale(scale) {}
};

/// An update's optional 16-bit working copy of the new master (mpc.SGD's
/// and mpc.Adam's `low` output, passes/weight_copies.h): copy[i] :=
/// Cast<type>(pOut[i]), written as pOut[i] is (a skipped step: the cast of
/// p). `data` nullptr: none.
struct WorkingCopyOut {
  void *data = nullptr;
  DType type = DType::F16;
};

/// SGD on fp32 master weights: pOut := p updated, bufOut := buf updated;
/// with found_inf set, outputs are copies of the inputs. buf/bufOut may be
/// nullptr (no momentum buffer / not written).
void launchSgd(const uint8_t *foundInf, const float *p, GradientIn g,
               const float *buf, float *pOut, float *bufOut, int64_t n,
               const SgdScalars &scalars, cudaStream_t stream,
               WorkingCopyOut copy = {});
void launchSgd(const uint8_t *foundInf, const float *p, GradientIn g,
               const uint16_t *buf, float *pOut, uint16_t *bufOut, int64_t n,
               const SgdScalars &scalars, cudaStream_t stream,
               WorkingCopyOut copy = {});

/// Adam/AdamW on fp32 master weights and moments; mOut/vOut may be nullptr.
void launchAdam(const uint8_t *foundInf, const float *p, GradientIn g,
                const float *m, const float *v, float *pOut, float *mOut,
                float *vOut, int64_t n, const AdamScalars &scalars,
                cudaStream_t stream, WorkingCopyOut copy = {});
void launchAdam(const uint8_t *foundInf, const float *p, GradientIn g,
                const uint16_t *m, const uint16_t *v, float *pOut,
                uint16_t *mOut, uint16_t *vOut, int64_t n,
                const AdamScalars &scalars, cudaStream_t stream,
                WorkingCopyOut copy = {});

/// A scalar the kernel reads on the device (the device-resident step's step
/// counter, a scheduled learning rate): dtype `type` is int64, int32, fp32
/// or fp64; `value` nullptr: none given.
struct DeviceScalar {
  const void *value = nullptr;
  DType type = DType::I64;
};
using DeviceStep = DeviceScalar;

/// launchSgd with firstStep taken from the device step counter (== 0) and,
/// when `lr` is given, -lr from it (mpc.LearningRate's output); the other
/// scalars from `scalars`: nothing is read on the host.
void launchSgdDeviceStep(const uint8_t *foundInf, DeviceStep step,
                         DeviceScalar lr, const float *p, GradientIn g,
                         const float *buf, float *pOut, float *bufOut,
                         int64_t n, const SgdScalars &scalars,
                         cudaStream_t stream, WorkingCopyOut copy = {});
void launchSgdDeviceStep(const uint8_t *foundInf, DeviceStep step,
                         DeviceScalar lr, const float *p, GradientIn g,
                         const uint16_t *buf, float *pOut, uint16_t *bufOut,
                         int64_t n, const SgdScalars &scalars,
                         cudaStream_t stream, WorkingCopyOut copy = {});

/// Adam's hyper-parameters, from which the kernel computes AdamScalars for
/// the device step counter with adamScalars' formulas in double (the
/// device's pow, within 2 ulp of the host's in double, so the fp32 scalars
/// agree with the CPU backend's except on a rounding tie).
struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0;
  bool decoupled = false;
};
/// `lr`, when given, replaces hyper.lr.
void launchAdamDeviceStep(const uint8_t *foundInf, DeviceStep step,
                          DeviceScalar lr, const float *p, GradientIn g,
                          const float *m, const float *v, float *pOut,
                          float *mOut, float *vOut, int64_t n,
                          const AdamHyper &hyper, cudaStream_t stream,
                          WorkingCopyOut copy = {});
void launchAdamDeviceStep(const uint8_t *foundInf, DeviceStep step,
                          DeviceScalar lr, const float *p, GradientIn g,
                          const uint16_t *m, const uint16_t *v, float *pOut,
                          uint16_t *mOut, uint16_t *vOut, int64_t n,
                          const AdamHyper &hyper, cudaStream_t stream,
                          WorkingCopyOut copy = {});

/// lrOut (fp64) := scheduledLr(schedule, step) (mpc.LearningRate), with the
/// step counter read on the device.
void launchLearningRate(const LrSchedule &schedule, DeviceStep step,
                        double *lrOut, cudaStream_t stream);

/// stepOut := step + (found_inf ? 0 : 1) for an int64, int32 or fp32 scalar.
void launchIncrementStep(DType t, const void *step, const uint8_t *foundInf,
                         void *stepOut, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
