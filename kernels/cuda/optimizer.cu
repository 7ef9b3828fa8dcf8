// CUDA optimizer kernels of the training step: unscale + found-inf over many
// tensors in one launch, the loss-scale update, fused SGD / Adam / AdamW and
// the step counter. Each reads found_inf on the device (no host round trip);
// the arithmetic is the shared MPC_HD code the CPU backend runs.
//
// The optimizer kernels are bandwidth bound: they launch at most one wave of
// resident blocks that grid-stride (so the Adam kernel's per-block pow runs
// once per block, not once per 256 elements), and when every buffer is
// 16-byte aligned they move float4s. Vectorising changes only the width of
// the loads and stores: each element still goes through the same scalar
// update, so the bits are those of the scalar path.
//
// SGD's momentum buffer and Adam's moments are fp32 or bf16 (M = uint16_t,
// the bit patterns; --optimizer-state-dtype=bf16): each kernel is a template
// on M, and the bf16 ones take the scalar path (their elements go through
// the shared *Stored update: widened, fp32 arithmetic, rounded on store).
// The gradient (GradientIn) is fp32, or fp16/bf16 read through loadAs (the
// type the same for every thread); only fp32 gradients move as float4.
#include "kernels/common/loss_scale_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/optimizer.h"

#include <cstdint>
#include <initializer_list>

namespace mpc {
namespace cuda {
namespace {

__device__ bool flagSet(const uint8_t *foundInf) {
  return foundInf != nullptr && *foundInf != 0;
}

__device__ float loadGradient(const UnscaleTensor &t, int64_t i) {
  switch (t.dtype) {
  case DType::F16:
    return fromHalfBits(static_cast<const uint16_t *>(t.src)[i]);
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

__device__ inline float4 load4(const float *x, int64_t k) {
  return reinterpret_cast<const float4 *>(x)[k];
}
__device__ inline void store4(float *x, int64_t k, float4 v) {
  reinterpret_cast<float4 *>(x)[k] = v;
}

/// The factor the update unscales its gradient by: float(1 / double(scale))
/// of the loss scale it was given (mpc.SGD's / mpc.Adam's grad_scale), else
/// 1. Read by every thread (one cached load of one scalar).
__device__ inline float gradientInv(GradientIn g) {
  return g.scale ? inverseLossScale(*g.scale) : 1.0f;
}

/// Gradient element i as the update uses it: widened exactly, then
/// UnscaleGradients' multiply (unscaleElement's: none when inv is 1), the
/// bits of the unscaled gradient.
__device__ inline float gradientAt(GradientIn g, float inv, int64_t i) {
  float out;
  unscaleElement(loadAs(g.type, g.data, i), inv, out);
  return out;
}

/// Elements 4k..4k+3 of an fp32 gradient, unscaled as gradientAt's.
__device__ inline float4 gradient4(GradientIn g, float inv, int64_t k) {
  float4 v = reinterpret_cast<const float4 *>(g.data)[k];
  unscaleElement(v.x, inv, v.x);
  unscaleElement(v.y, inv, v.y);
  unscaleElement(v.z, inv, v.z);
  unscaleElement(v.w, inv, v.w);
  return v;
}

/// The working copy of elements 4k..4k+3 (when the update writes one).
__device__ inline void storeCopy4(WorkingCopyOut c, int64_t k, float4 v) {
  if (!c.data)
    return;
  storeAs(c.type, c.data, 4 * k, v.x);
  storeAs(c.type, c.data, 4 * k + 1, v.y);
  storeAs(c.type, c.data, 4 * k + 2, v.z);
  storeAs(c.type, c.data, 4 * k + 3, v.w);
}

/// Element i of an SGD update (a copy when `skip`), the buffer stored as M.
template <typename M>
__device__ inline void sgdElement(bool skip, const float *p, GradientIn g,
                                  float inv, const M *buf, float *pOut,
                                  M *bufOut, WorkingCopyOut c, int64_t i,
                                  const SgdScalars &s) {
  float pv = p[i];
  M bv = buf ? buf[i] : M(0);
  if (!skip)
    sgdUpdateStored(pv, gradientAt(g, inv, i), bv, s);
  pOut[i] = pv;
  if (c.data)
    storeAs(c.type, c.data, i, pv);
  if (bufOut)
    bufOut[i] = bv;
}

/// This thread's elements of an SGD update (copies when `skip`); the body of
/// both SGD kernels, which differ only in where the step count comes from.
/// Outputs may alias inputs (in place): each thread reads its elements
/// before writing them, and no two threads share an element. With Vec4 (all
/// pointers 16-byte aligned), elements 4k..4k+3 move as one float4 and the
/// last n % 4 one by one, each through the same scalar update.
template <bool Vec4, typename M>
__device__ inline void
sgdElements(bool skip, const float *p, GradientIn g, const M *buf, float *pOut,
            M *bufOut, WorkingCopyOut c, int64_t n, const SgdScalars &s) {
  const float inv = gradientInv(g);
  if constexpr (Vec4) {
    static_assert(sizeof(M) == sizeof(float), "float4 moves fp32 buffers");
    int64_t n4 = n / 4;
    for (int64_t k = globalIndex(); k < n4; k += globalStride()) {
      float4 pv = load4(p, k);
      float4 bv = buf ? load4(buf, k) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (!skip) {
        float4 gv = gradient4(g, inv, k);
        sgdUpdate(pv.x, gv.x, bv.x, s);
        sgdUpdate(pv.y, gv.y, bv.y, s);
        sgdUpdate(pv.z, gv.z, bv.z, s);
        sgdUpdate(pv.w, gv.w, bv.w, s);
      }
      store4(pOut, k, pv);
      storeCopy4(c, k, pv);
      if (bufOut)
        store4(bufOut, k, bv);
    }
    // The last n % 4 (< kBlock) elements, one per thread.
    int64_t i = n4 * 4 + globalIndex();
    if (i < n)
      sgdElement(skip, p, g, inv, buf, pOut, bufOut, c, i, s);
  } else {
    for (int64_t i = globalIndex(); i < n; i += globalStride())
      sgdElement(skip, p, g, inv, buf, pOut, bufOut, c, i, s);
  }
}

template <bool Vec4, typename M>
__global__ void sgdKernel(const uint8_t *__restrict__ foundInf, const float *p,
                          GradientIn g, const M *buf, float *pOut, M *bufOut,
                          WorkingCopyOut c, int64_t n, SgdScalars s) {
  sgdElements<Vec4>(flagSet(foundInf), p, g, buf, pOut, bufOut, c, n, s);
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

/// A real scalar on the device (a learning rate: fp64 or fp32).
__device__ inline double readDeviceReal(DeviceScalar x) {
  return x.type == DType::F32 ? double(*static_cast<const float *>(x.value))
                              : *static_cast<const double *>(x.value);
}

template <bool Vec4, typename M>
__global__ void sgdDeviceStepKernel(const uint8_t *__restrict__ foundInf,
                                    DeviceStep step, DeviceScalar lr,
                                    const float *p, GradientIn g, const M *buf,
                                    float *pOut, M *bufOut, WorkingCopyOut c,
                                    int64_t n, SgdScalars s) {
  s.firstStep = readDeviceStep(step) == 0;
  if (lr.value) // as sgdScalars converts it
    s.negLr = float(-readDeviceReal(lr));
  sgdElements<Vec4>(flagSet(foundInf), p, g, buf, pOut, bufOut, c, n, s);
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

/// Element i of an Adam/AdamW update (a copy when `skip`), the moments
/// stored as M.
template <typename M>
__device__ inline void
adamElement(bool skip, const float *p, GradientIn g, float inv, const M *m,
            const M *v, float *pOut, M *mOut, M *vOut, WorkingCopyOut c,
            int64_t i, const AdamScalars &s) {
  float pv = p[i];
  M mv = m[i], vv = v[i];
  if (!skip)
    adamUpdateStored(pv, gradientAt(g, inv, i), mv, vv, s);
  pOut[i] = pv;
  if (c.data)
    storeAs(c.type, c.data, i, pv);
  if (mOut)
    mOut[i] = mv;
  if (vOut)
    vOut[i] = vv;
}

/// This thread's elements of an Adam/AdamW update (copies when `skip`); the
/// body of both Adam kernels. Aliasing and Vec4 as in sgdElements.
template <bool Vec4, typename M>
__device__ inline void adamElements(bool skip, const float *p, GradientIn g,
                                    const M *m, const M *v, float *pOut,
                                    M *mOut, M *vOut, WorkingCopyOut c,
                                    int64_t n, const AdamScalars &s) {
  const float inv = gradientInv(g);
  if constexpr (Vec4) {
    static_assert(sizeof(M) == sizeof(float), "float4 moves fp32 moments");
    int64_t n4 = n / 4;
    for (int64_t k = globalIndex(); k < n4; k += globalStride()) {
      float4 pv = load4(p, k), mv = load4(m, k), vv = load4(v, k);
      if (!skip) {
        float4 gv = gradient4(g, inv, k);
        adamUpdate(pv.x, gv.x, mv.x, vv.x, s);
        adamUpdate(pv.y, gv.y, mv.y, vv.y, s);
        adamUpdate(pv.z, gv.z, mv.z, vv.z, s);
        adamUpdate(pv.w, gv.w, mv.w, vv.w, s);
      }
      store4(pOut, k, pv);
      storeCopy4(c, k, pv);
      if (mOut)
        store4(mOut, k, mv);
      if (vOut)
        store4(vOut, k, vv);
    }
    // The last n % 4 (< kBlock) elements, one per thread.
    int64_t i = n4 * 4 + globalIndex();
    if (i < n)
      adamElement(skip, p, g, inv, m, v, pOut, mOut, vOut, c, i, s);
  } else {
    for (int64_t i = globalIndex(); i < n; i += globalStride())
      adamElement(skip, p, g, inv, m, v, pOut, mOut, vOut, c, i, s);
  }
}

template <bool Vec4, typename M>
__global__ void adamDeviceStepKernel(const uint8_t *__restrict__ foundInf,
                                     DeviceStep step, DeviceScalar lr,
                                     const float *p, GradientIn g, const M *m,
                                     const M *v, float *pOut, M *mOut, M *vOut,
                                     WorkingCopyOut c, int64_t n, AdamHyper h) {
  // One thread per block computes the step's scalars (two pow in double);
  // the grid is one wave of resident blocks, so that latency is paid once.
  __shared__ AdamScalars shared;
  if (threadIdx.x == 0) {
    if (lr.value)
      h.lr = readDeviceReal(lr);
    shared = adamScalarsOnDevice(h, readDeviceStep(step));
  }
  __syncthreads();
  AdamScalars s = shared; // registers, not a shared-memory read per element
  adamElements<Vec4>(flagSet(foundInf), p, g, m, v, pOut, mOut, vOut, c, n, s);
}

template <bool Vec4, typename M>
__global__ void adamKernel(const uint8_t *__restrict__ foundInf, const float *p,
                           GradientIn g, const M *m, const M *v, float *pOut,
                           M *mOut, M *vOut, WorkingCopyOut c, int64_t n,
                           AdamScalars s) {
  adamElements<Vec4>(flagSet(foundInf), p, g, m, v, pOut, mOut, vOut, c, n, s);
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

/// mpc.LearningRate: the shared closed form (kernels/common/
/// lr_schedule_math.h) with the device's cos and pow, in double.
__global__ void learningRateKernel(LrSchedule schedule, DeviceStep step,
                                   double *lrOut) {
  *lrOut = scheduledLr(schedule, readDeviceStep(step));
}

/// Blocks of kBlock threads of `kernel` that the current device holds at
/// once (SM count x resident blocks per SM).
int residentBlocks(const void *kernel) {
  int device = 0, sms = 0, perSm = 0;
  MPC_CUDA_CHECK(cudaGetDevice(&device));
  MPC_CUDA_CHECK(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  MPC_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, kBlock, 0));
  int blocks = sms * perSm;
  return blocks < 1 ? 1 : blocks;
}

/// The grid of a grid-stride kernel over `items` work items: gridFor(items),
/// capped at one wave of resident blocks of `Kernel` (queried on its first
/// launch, on that launch's device, and cached) so per-block setup runs once
/// per resident block and no block waits for a later wave. Only speed
/// depends on the grid: every kernel here grid-strides.
template <auto Kernel> unsigned oneWaveGrid(int64_t items) {
  static const int resident =
      residentBlocks(reinterpret_cast<const void *>(Kernel));
  unsigned grid = gridFor(items);
  return grid < unsigned(resident) ? grid : unsigned(resident);
}

/// Whether every non-null pointer is 16-byte aligned (float4 access).
bool aligned16(std::initializer_list<const void *> ptrs) {
  for (const void *q : ptrs)
    if (reinterpret_cast<uintptr_t>(q) % 16 != 0)
      return false;
  return true;
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

namespace {

// The launches, one template per kernel on the state's storage M: fp32
// state moves as float4 where every buffer is aligned.

template <typename M>
void sgdLaunch(const uint8_t *foundInf, const float *p, GradientIn g,
               const M *buf, float *pOut, M *bufOut, int64_t n,
               const SgdScalars &scalars, cudaStream_t s, WorkingCopyOut c) {
  if (n == 0)
    return;
  if constexpr (sizeof(M) == sizeof(float))
    if (g.type == DType::F32 && aligned16({p, g.data, buf, pOut, bufOut})) {
      sgdKernel<true, M>
          <<<oneWaveGrid<sgdKernel<true, M>>((n + 3) / 4), kBlock, 0, s>>>(
              foundInf, p, g, buf, pOut, bufOut, c, n, scalars);
      MPC_CUDA_CHECK_LAUNCH("sgdKernel");
      return;
    }
  sgdKernel<false, M><<<oneWaveGrid<sgdKernel<false, M>>(n), kBlock, 0, s>>>(
      foundInf, p, g, buf, pOut, bufOut, c, n, scalars);
  MPC_CUDA_CHECK_LAUNCH("sgdKernel");
}

void requireStepType(DType t, const char *op) {
  if (t != DType::I64 && t != DType::I32 && t != DType::F32 && t != DType::F64)
    throw Error(std::string(op) +
                ": the cuda kernel reads an int64, int32, fp32 or fp64 step "
                "counter, got " +
                dtypeName(t));
}

void requireLrType(DeviceScalar lr, const char *op) {
  if (lr.value && lr.type != DType::F64 && lr.type != DType::F32)
    throw Error(std::string(op) +
                ": the cuda kernel reads an fp64 or fp32 learning rate, got " +
                dtypeName(lr.type));
}

template <typename M>
void sgdDeviceStepLaunch(const uint8_t *foundInf, DeviceStep step,
                         DeviceScalar lr, const float *p, GradientIn g,
                         const M *buf, float *pOut, M *bufOut, int64_t n,
                         const SgdScalars &scalars, cudaStream_t s,
                         WorkingCopyOut c) {
  requireStepType(step.type, "SGD");
  requireLrType(lr, "SGD");
  if (n == 0)
    return;
  if constexpr (sizeof(M) == sizeof(float))
    if (g.type == DType::F32 && aligned16({p, g.data, buf, pOut, bufOut})) {
      sgdDeviceStepKernel<true, M>
          <<<oneWaveGrid<sgdDeviceStepKernel<true, M>>((n + 3) / 4), kBlock, 0,
             s>>>(foundInf, step, lr, p, g, buf, pOut, bufOut, c, n, scalars);
      MPC_CUDA_CHECK_LAUNCH("sgdDeviceStepKernel");
      return;
    }
  sgdDeviceStepKernel<false, M>
      <<<oneWaveGrid<sgdDeviceStepKernel<false, M>>(n), kBlock, 0, s>>>(
          foundInf, step, lr, p, g, buf, pOut, bufOut, c, n, scalars);
  MPC_CUDA_CHECK_LAUNCH("sgdDeviceStepKernel");
}

template <typename M>
void adamDeviceStepLaunch(const uint8_t *foundInf, DeviceStep step,
                          DeviceScalar lr, const float *p, GradientIn g,
                          const M *m, const M *v, float *pOut, M *mOut, M *vOut,
                          int64_t n, const AdamHyper &hyper, cudaStream_t s,
                          WorkingCopyOut c) {
  requireStepType(step.type, "Adam");
  requireLrType(lr, "Adam");
  if (n == 0)
    return;
  if constexpr (sizeof(M) == sizeof(float))
    if (g.type == DType::F32 &&
        aligned16({p, g.data, m, v, pOut, mOut, vOut})) {
      adamDeviceStepKernel<true, M>
          <<<oneWaveGrid<adamDeviceStepKernel<true, M>>((n + 3) / 4), kBlock, 0,
             s>>>(foundInf, step, lr, p, g, m, v, pOut, mOut, vOut, c, n,
                  hyper);
      MPC_CUDA_CHECK_LAUNCH("adamDeviceStepKernel");
      return;
    }
  adamDeviceStepKernel<false, M>
      <<<oneWaveGrid<adamDeviceStepKernel<false, M>>(n), kBlock, 0, s>>>(
          foundInf, step, lr, p, g, m, v, pOut, mOut, vOut, c, n, hyper);
  MPC_CUDA_CHECK_LAUNCH("adamDeviceStepKernel");
}

template <typename M>
void adamLaunch(const uint8_t *foundInf, const float *p, GradientIn g,
                const M *m, const M *v, float *pOut, M *mOut, M *vOut,
                int64_t n, const AdamScalars &scalars, cudaStream_t s,
                WorkingCopyOut c) {
  if (n == 0)
    return;
  if constexpr (sizeof(M) == sizeof(float))
    if (g.type == DType::F32 &&
        aligned16({p, g.data, m, v, pOut, mOut, vOut})) {
      adamKernel<true, M>
          <<<oneWaveGrid<adamKernel<true, M>>((n + 3) / 4), kBlock, 0, s>>>(
              foundInf, p, g, m, v, pOut, mOut, vOut, c, n, scalars);
      MPC_CUDA_CHECK_LAUNCH("adamKernel");
      return;
    }
  adamKernel<false, M><<<oneWaveGrid<adamKernel<false, M>>(n), kBlock, 0, s>>>(
      foundInf, p, g, m, v, pOut, mOut, vOut, c, n, scalars);
  MPC_CUDA_CHECK_LAUNCH("adamKernel");
}

} // namespace

// fp32 state and bf16 state (uint16_t bit patterns): one template each.

void launchSgd(const uint8_t *foundInf, const float *p, GradientIn g,
               const float *buf, float *pOut, float *bufOut, int64_t n,
               const SgdScalars &scalars, cudaStream_t s, WorkingCopyOut c) {
  sgdLaunch(foundInf, p, g, buf, pOut, bufOut, n, scalars, s, c);
}
void launchSgd(const uint8_t *foundInf, const float *p, GradientIn g,
               const uint16_t *buf, float *pOut, uint16_t *bufOut, int64_t n,
               const SgdScalars &scalars, cudaStream_t s, WorkingCopyOut c) {
  sgdLaunch(foundInf, p, g, buf, pOut, bufOut, n, scalars, s, c);
}

void launchSgdDeviceStep(const uint8_t *foundInf, DeviceStep step,
                         DeviceScalar lr, const float *p, GradientIn g,
                         const float *buf, float *pOut, float *bufOut,
                         int64_t n, const SgdScalars &scalars, cudaStream_t s,
                         WorkingCopyOut c) {
  sgdDeviceStepLaunch(foundInf, step, lr, p, g, buf, pOut, bufOut, n, scalars,
                      s, c);
}
void launchSgdDeviceStep(const uint8_t *foundInf, DeviceStep step,
                         DeviceScalar lr, const float *p, GradientIn g,
                         const uint16_t *buf, float *pOut, uint16_t *bufOut,
                         int64_t n, const SgdScalars &scalars, cudaStream_t s,
                         WorkingCopyOut c) {
  sgdDeviceStepLaunch(foundInf, step, lr, p, g, buf, pOut, bufOut, n, scalars,
                      s, c);
}

void launchAdamDeviceStep(const uint8_t *foundInf, DeviceStep step,
                          DeviceScalar lr, const float *p, GradientIn g,
                          const float *m, const float *v, float *pOut,
                          float *mOut, float *vOut, int64_t n,
                          const AdamHyper &hyper, cudaStream_t s,
                          WorkingCopyOut c) {
  adamDeviceStepLaunch(foundInf, step, lr, p, g, m, v, pOut, mOut, vOut, n,
                       hyper, s, c);
}
void launchAdamDeviceStep(const uint8_t *foundInf, DeviceStep step,
                          DeviceScalar lr, const float *p, GradientIn g,
                          const uint16_t *m, const uint16_t *v, float *pOut,
                          uint16_t *mOut, uint16_t *vOut, int64_t n,
                          const AdamHyper &hyper, cudaStream_t s,
                          WorkingCopyOut c) {
  adamDeviceStepLaunch(foundInf, step, lr, p, g, m, v, pOut, mOut, vOut, n,
                       hyper, s, c);
}

void launchAdam(const uint8_t *foundInf, const float *p, GradientIn g,
                const float *m, const float *v, float *pOut, float *mOut,
                float *vOut, int64_t n, const AdamScalars &scalars,
                cudaStream_t s, WorkingCopyOut c) {
  adamLaunch(foundInf, p, g, m, v, pOut, mOut, vOut, n, scalars, s, c);
}
void launchAdam(const uint8_t *foundInf, const float *p, GradientIn g,
                const uint16_t *m, const uint16_t *v, float *pOut,
                uint16_t *mOut, uint16_t *vOut, int64_t n,
                const AdamScalars &scalars, cudaStream_t s, WorkingCopyOut c) {
  adamLaunch(foundInf, p, g, m, v, pOut, mOut, vOut, n, scalars, s, c);
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

void launchLearningRate(const LrSchedule &schedule, DeviceStep step,
                        double *lrOut, cudaStream_t s) {
  requireStepType(step.type, "LearningRate");
  learningRateKernel<<<1, 1, 0, s>>>(schedule, step, lrOut);
  MPC_CUDA_CHECK_LAUNCH("learningRateKernel");
}

} // namespace cuda
} // namespace mpc
