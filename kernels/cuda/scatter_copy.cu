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

template <typename T>
void launchAs(const void *x, void *y, const BroadcastGeometry<1> &g,
              cudaStream_t s) {
  scatterCopyKernel<<<gridFor(g.count), kBlock, 0, s>>>(
      static_cast<const T *>(x), static_cast<T *>(y), g);
}

} // namespace

void launchScatterCopy(size_t elementSize, const void *x, void *y,
                       const BroadcastGeometry<1> &g, cudaStream_t s) {
  if (g.count == 0)
    return;
  switch (elementSize) {
  case 1:
    launchAs<uint8_t>(x, y, g, s);
    break;
  case 2:
    launchAs<uint16_t>(x, y, g, s);
    break;
  case 4:
    launchAs<uint32_t>(x, y, g, s);
    break;
  case 8:
    launchAs<uint64_t>(x, y, g, s);
    break;
  default:
    throw Error("ScatterCopy: element size " + std::to_string(elementSize) +
                " is not 1, 2, 4 or 8");
  }
  MPC_CUDA_CHECK_LAUNCH("scatterCopyKernel");
}

} // namespace cuda
} // namespace mpc
