// The CUDA SumToShape kernel: one thread per output element.
//
// Each thread walks its contributions in dY's row-major order and adds them
// in fp32, which is the order the CPU backend adds them in, so the sums are
// the same bits. Adjacent threads read adjacent elements (coalesced) when
// the kept axes are the inner ones, as for a bias gradient.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/reduce.h"

namespace mpc {
namespace cuda {
namespace {

template <typename Io>
__global__ void sumToShapeKernel(const typename Io::Storage *__restrict__ dy,
                                 typename Io::Storage *__restrict__ dx,
                                 SumToShapeGeometry g) {
  for (int64_t o = globalIndex(); o < g.outCount; o += globalStride()) {
    int64_t base = g.base(o);
    float acc = 0.0f;
    for (int64_t r = 0; r < g.reducedCount; ++r)
      acc += Io::toFloat(dy[base + g.reduced(r)]);
    dx[o] = Io::fromFloat(acc);
  }
}

} // namespace

void launchSumToShape(DType t, const void *dy, void *dx,
                      const SumToShapeGeometry &g, cudaStream_t s) {
  if (g.outCount == 0)
    return;
  dispatchDeviceFloat(t, "SumToShape", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    sumToShapeKernel<Io><<<gridFor(g.outCount), kBlock, 0, s>>>(
        static_cast<const S *>(dy), static_cast<S *>(dx), g);
  });
  MPC_CUDA_CHECK_LAUNCH("sumToShapeKernel");
}

} // namespace cuda
} // namespace mpc
