// CUDA softmax kernels: one warp per row, fp32 statistics.
//
// Each lane takes the row's elements j = lane, lane + 32, ...; the row
// maximum and sums combine across the warp in a fixed tree (warp_reduce.cuh),
// so results are deterministic; the per-element formulas are the CPU
// backend's (kernels/common/softmax_math.h). A row is read two or three
// times from global memory rather than held in registers, which keeps any
// row length working; rows of a transformer fit in L1/L2 anyway.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/warp_reduce.cuh"

namespace mpc {
namespace cuda {
namespace {

constexpr unsigned kRowsPerBlock = kBlock / kWarp;

__device__ int64_t rowBase(const AxisRows &r, int64_t row) {
  int64_t o = row / r.inner, i = row % r.inner;
  return o * r.len * r.inner + i;
}

// x and y may be the same bytes (plan-memory runs Softmax in place over an
// input that dies there), hence no __restrict__: a row is read whole (max,
// sum) before any of it is written, and each element is read before the
// thread that reads it writes it.
template <bool Log>
__global__ void softmaxKernel(DType t, const void *x, void *y, AxisRows r) {
  int64_t lane = threadIdx.x % kWarp;
  int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
       row < r.rows(); row += stride) {
    int64_t base = rowBase(r, row);
    float mx = -INFINITY;
    for (int64_t j = lane; j < r.len; j += kWarp)
      mx = softmaxMax(mx, loadAs(t, x, base + j * r.inner));
    mx = warpMax(mx);
    float sum = 0.0f;
    for (int64_t j = lane; j < r.len; j += kWarp)
      sum += softmaxExpTerm(loadAs(t, x, base + j * r.inner), mx);
    sum = warpSum(sum);
    float logSum = Log ? logOf(sum) : 0.0f;
    for (int64_t j = lane; j < r.len; j += kWarp) {
      int64_t k = base + j * r.inner;
      float v = loadAs(t, x, k);
      storeAs(t, y, k,
              Log ? logSoftmaxValue(v, mx, logSum) : softmaxValue(v, mx, sum));
    }
  }
}

// dx may be dy's or y's bytes (in place, as for softmaxKernel).
template <bool Log>
__global__ void softmaxGradKernel(DType gt, const void *dy, DType ft,
                                  const void *y, void *dx, AxisRows r) {
  int64_t lane = threadIdx.x % kWarp;
  int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
       row < r.rows(); row += stride) {
    int64_t base = rowBase(r, row);
    float sum = 0.0f;
    for (int64_t j = lane; j < r.len; j += kWarp) {
      int64_t k = base + j * r.inner;
      sum += softmaxGradTerm<Log>(loadAs(gt, dy, k), loadAs(ft, y, k));
    }
    sum = warpSum(sum);
    for (int64_t j = lane; j < r.len; j += kWarp) {
      int64_t k = base + j * r.inner;
      storeAs(gt, dx, k,
              softmaxGradValue<Log>(loadAs(gt, dy, k), loadAs(ft, y, k), sum));
    }
  }
}

unsigned rowGrid(int64_t rows) {
  int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return unsigned(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

} // namespace

void launchSoftmax(bool log, DType t, const void *x, void *y, const AxisRows &r,
                   cudaStream_t s) {
  if (r.rows() == 0 || r.len == 0)
    return;
  requireDeviceFloat(t, "Softmax");
  if (log)
    softmaxKernel<true><<<rowGrid(r.rows()), kBlock, 0, s>>>(t, x, y, r);
  else
    softmaxKernel<false><<<rowGrid(r.rows()), kBlock, 0, s>>>(t, x, y, r);
  MPC_CUDA_CHECK_LAUNCH("softmaxKernel");
}

void launchSoftmaxGrad(bool log, DType gt, const void *dy, DType ft,
                       const void *y, void *dx, const AxisRows &r,
                       cudaStream_t s) {
  if (r.rows() == 0 || r.len == 0)
    return;
  requireDeviceFloat(gt, "SoftmaxGrad");
  requireDeviceFloat(ft, "SoftmaxGrad");
  if (log)
    softmaxGradKernel<true>
        <<<rowGrid(r.rows()), kBlock, 0, s>>>(gt, dy, ft, y, dx, r);
  else
    softmaxGradKernel<false>
        <<<rowGrid(r.rows()), kBlock, 0, s>>>(gt, dy, ft, y, dx, r);
  MPC_CUDA_CHECK_LAUNCH("softmaxGradKernel");
}

} // namespace cuda
} // namespace mpc
