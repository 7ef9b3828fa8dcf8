// CUDA GELU kernels: grid-stride loops over the shared formulas of
// kernels/common/gelu_math.h, computed in fp32 and rounded once on store.
#include "kernels/common/gelu_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/gelu.h"

namespace mpc {
namespace cuda {
namespace {

__global__ void geluKernel(DType t, const void *__restrict__ x,
                           void *__restrict__ y, int64_t n, bool tanhForm) {
  for (int64_t i = globalIndex(); i < n; i += globalStride())
    storeAs(t, y, i, geluForward(loadAs(t, x, i), tanhForm));
}

template <GeluGradKind K>
__global__ void geluGradKernel(DType gt, const void *__restrict__ dy, DType ft,
                               const void *__restrict__ x,
                               void *__restrict__ dx, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    float g = loadAs(gt, dy, i), v = loadAs(ft, x, i);
    float r = K == GeluGradKind::Erf
                  ? erfGradValue(g, v)
                  : g * geluDerivative(v, K == GeluGradKind::GeluTanh);
    storeAs(gt, dx, i, r);
  }
}

} // namespace

void launchGelu(DType t, const void *x, void *y, int64_t n, bool tanhForm,
                cudaStream_t s) {
  if (n == 0)
    return;
  requireDeviceFloat(t, "Gelu");
  geluKernel<<<gridFor(n), kBlock, 0, s>>>(t, x, y, n, tanhForm);
  MPC_CUDA_CHECK_LAUNCH("geluKernel");
}

void launchGeluGrad(GeluGradKind kind, DType gt, const void *dy, DType ft,
                    const void *x, void *dx, int64_t n, cudaStream_t s) {
  if (n == 0)
    return;
  requireDeviceFloat(gt, "GeluGrad");
  requireDeviceFloat(ft, "GeluGrad");
  unsigned grid = gridFor(n);
  switch (kind) {
  case GeluGradKind::Gelu:
    geluGradKernel<GeluGradKind::Gelu>
        <<<grid, kBlock, 0, s>>>(gt, dy, ft, x, dx, n);
    break;
  case GeluGradKind::GeluTanh:
    geluGradKernel<GeluGradKind::GeluTanh>
        <<<grid, kBlock, 0, s>>>(gt, dy, ft, x, dx, n);
    break;
  case GeluGradKind::Erf:
    geluGradKernel<GeluGradKind::Erf>
        <<<grid, kBlock, 0, s>>>(gt, dy, ft, x, dx, n);
    break;
  }
  MPC_CUDA_CHECK_LAUNCH("geluGradKernel");
}

} // namespace cuda
} // namespace mpc
