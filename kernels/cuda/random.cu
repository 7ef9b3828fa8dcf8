// The CUDA kernel of the random ops: one thread per element, grid-striding;
// every element's draw depends on (base, i) alone (kernels/common/
// random_math.h), so it matches the CPU backend's draw.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/random.h"

namespace mpc {
namespace cuda {
namespace {

__global__ void randomKernel(RandomKind kind, DType t, void *__restrict__ out,
                             int64_t n, uint64_t base, float a, float b,
                             const void *__restrict__ p, DType pType,
                             const uint64_t *seedOnDevice) {
  if (seedOnDevice)
    base ^= *seedOnDevice;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    float v;
    if (kind == RandomKind::Uniform)
      v = randomUniformAt(base, i, a, b);
    else if (kind == RandomKind::Normal)
      v = randomNormalAt(base, i, a, b);
    else
      v = randomBernoulliAt(base, i, loadAs(pType, p, i));
    storeAs(t, out, i, v);
  }
}

} // namespace

void launchRandom(RandomKind kind, DType t, void *out, int64_t n, uint64_t base,
                  float a, float b, const void *p, DType pType, cudaStream_t s,
                  const uint64_t *seedOnDevice) {
  if (n == 0)
    return;
  requireDeviceFloat(t, "random draw");
  if (kind == RandomKind::Bernoulli)
    requireDeviceFloat(pType, "Bernoulli");
  randomKernel<<<gridFor(n), kBlock, 0, s>>>(kind, t, out, n, base, a, b, p,
                                             pType, seedOnDevice);
  MPC_CUDA_CHECK_LAUNCH("randomKernel");
}

} // namespace cuda
} // namespace mpc
