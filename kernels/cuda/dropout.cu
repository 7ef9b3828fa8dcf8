// CUDA Dropout kernels: each thread draws its elements' keep bits from
// (base, i) alone (kernels/common/dropout_rng.h), so the mask needs no
// generator state and matches the CPU backend's exactly; x * scale is one
// fp32 multiply, rounded once, as on the CPU.
#include "kernels/common/dropout_rng.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/dropout.h"

namespace mpc {
namespace cuda {
namespace {

__global__ void dropoutKernel(DType t, const void *__restrict__ x,
                              void *__restrict__ y, uint8_t *__restrict__ mask,
                              int64_t n, uint64_t base, uint32_t threshold,
                              float scale, const uint64_t *seedOnDevice) {
  if (seedOnDevice)
    base ^= *seedOnDevice;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    bool keep = dropoutKeep(base, i, threshold);
    if (mask)
      mask[i] = keep ? 1 : 0;
    storeAs(t, y, i, keep ? loadAs(t, x, i) * scale : 0.0f);
  }
}

__global__ void dropoutGradKernel(DType t, const void *__restrict__ dy,
                                  const uint8_t *__restrict__ mask,
                                  void *__restrict__ dx, int64_t n,
                                  float scale) {
  for (int64_t i = globalIndex(); i < n; i += globalStride())
    storeAs(t, dx, i, mask[i] ? loadAs(t, dy, i) * scale : 0.0f);
}

} // namespace

void launchDropout(DType t, const void *x, void *y, uint8_t *mask, int64_t n,
                   uint64_t base, uint32_t threshold, float scale,
                   cudaStream_t s, const uint64_t *seedOnDevice) {
  if (n == 0)
    return;
  requireDeviceFloat(t, "Dropout");
  dropoutKernel<<<gridFor(n), kBlock, 0, s>>>(t, x, y, mask, n, base, threshold,
                                              scale, seedOnDevice);
  MPC_CUDA_CHECK_LAUNCH("dropoutKernel");
}

void launchDropoutGrad(DType t, const void *dy, const uint8_t *mask, void *dx,
                       int64_t n, float scale, cudaStream_t s) {
  if (n == 0)
    return;
  requireDeviceFloat(t, "DropoutGrad");
  dropoutGradKernel<<<gridFor(n), kBlock, 0, s>>>(t, dy, mask, dx, n, scale);
  MPC_CUDA_CHECK_LAUNCH("dropoutGradKernel");
}

} // namespace cuda
} // namespace mpc
