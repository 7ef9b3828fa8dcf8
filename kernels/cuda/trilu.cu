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

template <typename T>
void launch(const void *x, void *y, int64_t n, int64_t rows, int64_t cols,
            int64_t k, bool upper, cudaStream_t s) {
  triluKernel<T><<<gridFor(n), kBlock, 0, s>>>(
      static_cast<const T *>(x), static_cast<T *>(y), n, rows, cols, k, upper);
}

} // namespace

void launchTrilu(size_t elementSize, const void *x, void *y, int64_t matrices,
                 int64_t rows, int64_t cols, int64_t k, bool upper,
                 cudaStream_t s) {
  int64_t n = matrices * rows * cols;
  if (n == 0)
    return;
  switch (elementSize) {
  case 1:
    launch<uint8_t>(x, y, n, rows, cols, k, upper, s);
    break;
  case 2:
    launch<uint16_t>(x, y, n, rows, cols, k, upper, s);
    break;
  case 4:
    launch<uint32_t>(x, y, n, rows, cols, k, upper, s);
    break;
  case 8:
    launch<uint64_t>(x, y, n, rows, cols, k, upper, s);
    break;
  default:
    throw Error("Trilu: the cuda kernel moves elements of 1, 2, 4 or 8 "
                "bytes, not " +
                std::to_string(elementSize));
  }
  MPC_CUDA_CHECK_LAUNCH("triluKernel");
}

} // namespace cuda
} // namespace mpc
