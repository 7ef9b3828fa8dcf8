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
template <bool Log, typename Io>
__global__ void softmaxKernel(const typename Io::Storage *x,
                              typename Io::Storage *y, AxisRows r) {
  int64_t lane = threadIdx.x % kWarp;
  int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
       row < r.rows(); row += stride) {
    int64_t base = rowBase(r, row);
    float mx = -INFINITY;
    for (int64_t j = lane; j < r.len; j += kWarp)
      mx = softmaxMax(mx, Io::toFloat(x[base + j * r.inner]));
    mx = warpMax(mx);
    float sum = 0.0f;
    for (int64_t j = lane; j < r.len; j += kWarp)
      sum += softmaxExpTerm(Io::toFloat(x[base + j * r.inner]), mx);
    sum = warpSum(sum);
    float logSum = Log ? logOf(sum) : 0.0f;
    for (int64_t j = lane; j < r.len; j += kWarp) {
      int64_t k = base + j * r.inner;
      float v = Io::toFloat(x[k]);
      y[k] = Io::fromFloat(Log ? logSoftmaxValue(v, mx, logSum)
                               : softmaxValue(v, mx, sum));
    }
  }
}

// dx may be dy's or y's bytes (in place, as for softmaxKernel).
template <bool Log, typename G, typename F>
__global__ void softmaxGradKernel(const typename G::Storage *dy,
                                  const typename F::Storage *y,
                                  typename G::Storage *dx, AxisRows r) {
  int64_t lane = threadIdx.x % kWarp;
  int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
       row < r.rows(); row += stride) {
    int64_t base = rowBase(r, row);
    float sum = 0.0f;
    for (int64_t j = lane; j < r.len; j += kWarp) {
      int64_t k = base + j * r.inner;
      sum += softmaxGradTerm<Log>(G::toFloat(dy[k]), F::toFloat(y[k]));
    }
    sum = warpSum(sum);
    for (int64_t j = lane; j < r.len; j += kWarp) {
      int64_t k = base + j * r.inner;
      dx[k] = G::fromFloat(
          softmaxGradValue<Log>(G::toFloat(dy[k]), F::toFloat(y[k]), sum));
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
  dispatchDeviceFloat(t, "Softmax", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    auto *px = static_cast<const S *>(x);
    auto *py = static_cast<S *>(y);
    if (log)
      softmaxKernel<true, Io><<<rowGrid(r.rows()), kBlock, 0, s>>>(px, py, r);
    else
      softmaxKernel<false, Io><<<rowGrid(r.rows()), kBlock, 0, s>>>(px, py, r);
  });
  MPC_CUDA_CHECK_LAUNCH("softmaxKernel");
}

void launchSoftmaxGrad(bool log, DType gt, const void *dy, DType ft,
                       const void *y, void *dx, const AxisRows &r,
                       cudaStream_t s) {
  if (r.rows() == 0 || r.len == 0)
    return;
  dispatchDeviceFloat(gt, "SoftmaxGrad", [&](auto gio) {
    using G = decltype(gio);
    dispatchDeviceFloat(ft, "SoftmaxGrad", [&](auto fio) {
      using F = decltype(fio);
      auto *pdy = static_cast<const typename G::Storage *>(dy);
      auto *py = static_cast<const typename F::Storage *>(y);
      auto *pdx = static_cast<typename G::Storage *>(dx);
      if (log)
        softmaxGradKernel<true, G, F>
            <<<rowGrid(r.rows()), kBlock, 0, s>>>(pdy, py, pdx, r);
      else
        softmaxGradKernel<false, G, F>
            <<<rowGrid(r.rows()), kBlock, 0, s>>>(pdy, py, pdx, r);
    });
  });
  MPC_CUDA_CHECK_LAUNCH("softmaxGradKernel");
}

} // namespace cuda
} // namespace mpc
