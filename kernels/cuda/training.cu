// CUDA kernels of the training step: unscale + found-inf over many tensors
// in one launch, the loss-scale update, fused SGD / Adam / AdamW and the
// step counter. Each reads found_inf on the device (no host round trip);
// the arithmetic is the shared MPC_HD code the CPU backend runs.
#include "kernels/common/loss_scale_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/training.h"

namespace mpc {
namespace cuda {
namespace {

__device__ bool flagSet(const uint8_t *foundInf) {
  return foundInf != nullptr && *foundInf != 0;
}

__device__ float loadGradient(const UnscaleTensor &t, int64_t i) {
  switch (t.dtype) {
  case DType::F16:
    return halfToFloat(static_cast<const uint16_t *>(t.src)[i]);
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(t.src)[i]);
  default:
    return static_cast<const float *>(t.src)[i];
  }
}

/// One block per chunk; a block's elements share a tensor, so the dtype
/// switch does not diverge.
__global__ void unscaleKernel(const float *__restrict__ scale,
                              const UnscaleTensor *__restrict__ tensors,
                              const UnscaleChunk *__restrict__ chunks,
                              uint8_t *__restrict__ foundInf) {
  UnscaleChunk c = chunks[blockIdx.x];
  UnscaleTensor t = tensors[c.tensor];
  float inv = inverseLossScale(*scale);
  int64_t end = c.begin + kUnscaleChunk < t.n ? c.begin + kUnscaleChunk : t.n;
  bool anyInf = false;
  for (int64_t i = c.begin + threadIdx.x; i < end; i += blockDim.x) {
    float out;
    anyInf |= !unscaleElement(loadGradient(t, i), inv, out);
    if (t.dst)
      t.dst[i] = out;
  }
  // Every writer stores the same 1; zero was set before the launch.
  if (anyInf)
    *foundInf = 1;
}

__global__ void updateLossScaleKernel(const float *scale, const void *tracker,
                                      bool tracker64, const uint8_t *foundInf,
                                      float *scaleOut, void *trackerOut,
                                      double growthFactor, double backoffFactor,
                                      int64_t growthInterval) {
  float s = *scale;
  int64_t t = tracker64 ? *static_cast<const int64_t *>(tracker)
                        : int64_t(*static_cast<const int32_t *>(tracker));
  updateLossScale(s, t, flagSet(foundInf), growthFactor, backoffFactor,
                  growthInterval);
  *scaleOut = s;
  if (trackerOut) {
    if (tracker64)
      *static_cast<int64_t *>(trackerOut) = t;
    else
      *static_cast<int32_t *>(trackerOut) = int32_t(t);
  }
}

/// This thread's elements of an SGD update (copies when `skip`); the body of
/// both SGD kernels, which differ only in where the step count comes from.
__device__ inline void sgdElements(bool skip, const float *__restrict__ p,
                                   const float *__restrict__ g,
                                   const float *__restrict__ buf, float *pOut,
                                   float *bufOut, int64_t n,
                                   const SgdScalars &s) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    float pv = p[i], bv = buf ? buf[i] : 0.0f;
    if (!skip)
      sgdUpdate(pv, g[i], bv, s);
    pOut[i] = pv;
    if (bufOut)
      bufOut[i] = bv;
  }
}

__global__ void sgdKernel(const uint8_t *__restrict__ foundInf,
                          const float *__restrict__ p,
                          const float *__restrict__ g,
                          const float *__restrict__ buf, float *pOut,
                          float *bufOut, int64_t n, SgdScalars s) {
  sgdElements(flagSet(foundInf), p, g, buf, pOut, bufOut, n, s);
}

__device__ inline int64_t readDeviceStep(DeviceStep step) {
  switch (step.type) {
  case DType::I64:
    return *static_cast<const int64_t *>(step.value);
  case DType::I32:
    return *static_cast<const int32_t *>(step.value);
  case DType::F32:
    return int64_t(*static_cast<const float *>(step.value));
  default:
    return int64_t(*static_cast<const double *>(step.value));
  }
}

__global__ void sgdDeviceStepKernel(const uint8_t *__restrict__ foundInf,
                                    DeviceStep step,
                                    const float *__restrict__ p,
                                    const float *__restrict__ g,
                                    const float *__restrict__ buf, float *pOut,
                                    float *bufOut, int64_t n, SgdScalars s) {
  s.firstStep = readDeviceStep(step) == 0;
  sgdElements(flagSet(foundInf), p, g, buf, pOut, bufOut, n, s);
}

/// adamScalars (kernels/common/optimizer_math.h) on the device: the same
/// expressions in the same order, in double.
__device__ AdamScalars adamScalarsOnDevice(const AdamHyper &h, int64_t step) {
  AdamScalars s;
  double t = double(step + 1);
  double bc1 = 1.0 - ::pow(h.beta1, t);
  double bc2 = 1.0 - ::pow(h.beta2, t);
  s.weightDecay = float(h.weightDecay);
  s.decayFactor = float(1.0 - h.lr * h.weightDecay);
  s.hasWeightDecay = h.weightDecay != 0.0;
  s.decoupled = h.decoupled;
  s.lerpWeight = float(1.0 - h.beta1);
  s.beta2 = float(h.beta2);
  s.oneMinusBeta2 = float(1.0 - h.beta2);
  s.negStepSize = float(-(h.lr / bc1));
  s.biasCorrection2Sqrt = float(::sqrt(bc2));
  s.eps = float(h.eps);
  return s;
}

/// This thread's elements of an Adam/AdamW update (copies when `skip`); the
/// body of both Adam kernels.
__device__ inline void adamElements(bool skip, const float *__restrict__ p,
                                    const float *__restrict__ g,
                                    const float *__restrict__ m,
                                    const float *__restrict__ v, float *pOut,
                                    float *mOut, float *vOut, int64_t n,
                                    const AdamScalars &s) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    float pv = p[i], mv = m[i], vv = v[i];
    if (!skip)
      adamUpdate(pv, g[i], mv, vv, s);
    pOut[i] = pv;
    if (mOut)
      mOut[i] = mv;
    if (vOut)
      vOut[i] = vv;
  }
}

__global__ void
adamDeviceStepKernel(const uint8_t *__restrict__ foundInf, DeviceStep step,
                     const float *__restrict__ p, const float *__restrict__ g,
                     const float *__restrict__ m, const float *__restrict__ v,
                     float *pOut, float *mOut, float *vOut, int64_t n,
                     AdamHyper h) {
  // One thread per block computes the step's scalars (two pow in double).
  __shared__ AdamScalars shared;
  if (threadIdx.x == 0)
    shared = adamScalarsOnDevice(h, readDeviceStep(step));
  __syncthreads();
  AdamScalars s = shared; // registers, not a shared-memory read per element
  adamElements(flagSet(foundInf), p, g, m, v, pOut, mOut, vOut, n, s);
}

__global__ void adamKernel(const uint8_t *__restrict__ foundInf,
                           const float *__restrict__ p,
                           const float *__restrict__ g,
                           const float *__restrict__ m,
                           const float *__restrict__ v, float *pOut,
                           float *mOut, float *vOut, int64_t n, AdamScalars s) {
  adamElements(flagSet(foundInf), p, g, m, v, pOut, mOut, vOut, n, s);
}

__global__ void incrementStepKernel(DType t, const void *step,
                                    const uint8_t *foundInf, void *stepOut) {
  bool skip = flagSet(foundInf);
  switch (t) {
  case DType::I64: {
    int64_t v = *static_cast<const int64_t *>(step);
    *static_cast<int64_t *>(stepOut) = skip ? v : v + 1;
    break;
  }
  case DType::I32: {
    int32_t v = *static_cast<const int32_t *>(step);
    *static_cast<int32_t *>(stepOut) = skip ? v : v + 1;
    break;
  }
  default: {
    float v = *static_cast<const float *>(step);
    *static_cast<float *>(stepOut) = skip ? v : v + 1.0f;
    break;
  }
  }
}

} // namespace

std::vector<UnscaleChunk>
unscaleChunks(const std::vector<UnscaleTensor> &tensors) {
  std::vector<UnscaleChunk> chunks;
  for (size_t t = 0; t < tensors.size(); ++t)
    for (int64_t b = 0; b < tensors[t].n; b += kUnscaleChunk)
      chunks.push_back({int32_t(t), 0, b});
  return chunks;
}

void launchUnscaleGradients(const float *scale, const UnscaleTensor *tensors,
                            const UnscaleChunk *chunks, int64_t numChunks,
                            uint8_t *foundInf, cudaStream_t s) {
  MPC_CUDA_CHECK(cudaMemsetAsync(foundInf, 0, 1, s));
  if (numChunks == 0)
    return;
  if (numChunks > int64_t(0x7fffffff))
    throw Error("UnscaleGradients: too many elements for one launch");
  unscaleKernel<<<unsigned(numChunks), kBlock, 0, s>>>(scale, tensors, chunks,
                                                       foundInf);
  MPC_CUDA_CHECK_LAUNCH("unscaleKernel");
}

void launchUpdateLossScale(const float *scale, const void *tracker,
                           bool tracker64, const uint8_t *foundInf,
                           float *scaleOut, void *trackerOut,
                           double growthFactor, double backoffFactor,
                           int64_t growthInterval, cudaStream_t s) {
  updateLossScaleKernel<<<1, 1, 0, s>>>(scale, tracker, tracker64, foundInf,
                                        scaleOut, trackerOut, growthFactor,
                                        backoffFactor, growthInterval);
  MPC_CUDA_CHECK_LAUNCH("updateLossScaleKernel");
}

void launchSgd(const uint8_t *foundInf, const float *p, const float *g,
               const float *buf, float *pOut, float *bufOut, int64_t n,
               const SgdScalars &scalars, cudaStream_t s) {
  if (n == 0)
    return;
  sgdKernel<<<gridFor(n), kBlock, 0, s>>>(foundInf, p, g, buf, pOut, bufOut, n,
                                          scalars);
  MPC_CUDA_CHECK_LAUNCH("sgdKernel");
}

static void requireStepType(DType t, const char *op) {
  if (t != DType::I64 && t != DType::I32 && t != DType::F32 && t != DType::F64)
    throw Error(std::string(op) +
                ": the cuda kernel reads an int64, int32, fp32 or fp64 step "
                "counter, got " +
                dtypeName(t));
}

void launchSgdDeviceStep(const uint8_t *foundInf, DeviceStep step,
                         const float *p, const float *g, const float *buf,
                         float *pOut, float *bufOut, int64_t n,
                         const SgdScalars &scalars, cudaStream_t s) {
  requireStepType(step.type, "SGD");
  if (n == 0)
    return;
  sgdDeviceStepKernel<<<gridFor(n), kBlock, 0, s>>>(foundInf, step, p, g, buf,
                                                    pOut, bufOut, n, scalars);
  MPC_CUDA_CHECK_LAUNCH("sgdDeviceStepKernel");
}

void launchAdamDeviceStep(const uint8_t *foundInf, DeviceStep step,
                          const float *p, const float *g, const float *m,
                          const float *v, float *pOut, float *mOut, float *vOut,
                          int64_t n, const AdamHyper &hyper, cudaStream_t s) {
  requireStepType(step.type, "Adam");
  if (n == 0)
    return;
  adamDeviceStepKernel<<<gridFor(n), kBlock, 0, s>>>(
      foundInf, step, p, g, m, v, pOut, mOut, vOut, n, hyper);
  MPC_CUDA_CHECK_LAUNCH("adamDeviceStepKernel");
}

void launchAdam(const uint8_t *foundInf, const float *p, const float *g,
                const float *m, const float *v, float *pOut, float *mOut,
                float *vOut, int64_t n, const AdamScalars &scalars,
                cudaStream_t s) {
  if (n == 0)
    return;
  adamKernel<<<gridFor(n), kBlock, 0, s>>>(foundInf, p, g, m, v, pOut, mOut,
                                           vOut, n, scalars);
  MPC_CUDA_CHECK_LAUNCH("adamKernel");
}

void launchIncrementStep(DType t, const void *step, const uint8_t *foundInf,
                         void *stepOut, cudaStream_t s) {
  if (t != DType::I64 && t != DType::I32 && t != DType::F32)
    throw Error(std::string("IncrementStep: the cuda kernel takes an int64, "
                            "int32 or fp32 step, got ") +
                dtypeName(t));
  incrementStepKernel<<<1, 1, 0, s>>>(t, step, foundInf, stepOut);
  MPC_CUDA_CHECK_LAUNCH("incrementStepKernel");
}

} // namespace cuda
} // namespace mpc
