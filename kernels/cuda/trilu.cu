// The CUDA Trilu kernel: one thread per element, grid-striding; the kept
// run of the element's row comes from the rule the CPU kernel uses.
#include "kernels/common/trilu_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/trilu.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__global__ void triluKernel(const T *x, T *y, // y may be x: no __restrict__
                            int64_t n, int64_t rows, int64_t cols, int64_t k,
                            bool upper) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    int64_t col = i % cols, row = (i / cols) % rows;
    TriluRun run = triluKeptColumns(row, cols, k, upper);
    y[i] = col >= run.begin && col < run.end ? x[i] : T(0);
  }
}

} // namespace

void launchTrilu(size_t elementSize, const void *x, void *y, int64_t matrices,
                 int64_t rows, int64_t cols, int64_t k, bool upper,
                 cudaStream_t s) {
  int64_t n = matrices * rows * cols;
  if (n == 0)
    return;
  dispatchElementSize(elementSize, "Trilu", [&](auto element) {
    using T = decltype(element);
    triluKernel<T><<<gridFor(n), kBlock, 0, s>>>(static_cast<const T *>(x),
                                                 static_cast<T *>(y), n, rows,
                                                 cols, k, upper);
  });
  MPC_CUDA_CHECK_LAUNCH("triluKernel");
}

} // namespace cuda
} // namespace mpc
