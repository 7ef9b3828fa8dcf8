// The strided scatter copy: one thread per source element, elements moved
// as raw bytes of their size.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/scatter_copy.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__global__ void scatterCopyKernel(const T *__restrict__ x, T *__restrict__ y,
                                  BroadcastGeometry<1> g) {
  for (int64_t i = globalIndex(); i < g.count; i += globalStride()) {
    int64_t off[1];
    g.offsets(i, off);
    y[off[0]] = x[i];
  }
}

} // namespace

void launchScatterCopy(size_t elementSize, const void *x, void *y,
                       const BroadcastGeometry<1> &g, cudaStream_t s) {
  if (g.count == 0)
    return;
  dispatchElementSize(elementSize, "ScatterCopy", [&](auto e) {
    using T = decltype(e);
    scatterCopyKernel<<<gridFor(g.count), kBlock, 0, s>>>(
        static_cast<const T *>(x), static_cast<T *>(y), g);
  });
  MPC_CUDA_CHECK_LAUNCH("scatterCopyKernel");
}

} // namespace cuda
} // namespace mpc
