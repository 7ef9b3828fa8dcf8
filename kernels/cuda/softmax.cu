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
// thread that reads it writes it. x is read as In (widened exactly) and y
// written as Out: the same type, or fp32 for mpc.SoftmaxTo. With a divisor d
// (mpc.DivSoftmaxTo, one element of In), each x is divided by it first and
// the quotient rounded to In, as the Div node would. With ylow (their
// optional Ylow), each stored y is also written cast to Low.
template <bool Log, typename In, typename Out, typename Low = F16Dev>
__global__ void softmaxKernel(const typename In::Storage *x,
                              typename Out::Storage *y,
                              const typename In::Storage *d,
                              typename Low::Storage *ylow, AxisRows r) {
  float divisor = d ? In::toFloat(*d) : 1.0f;
  auto value = [&](int64_t k) {
    float v = In::toFloat(x[k]);
    return d ? In::toFloat(In::fromFloat(v / divisor)) : v;
  };
  int64_t lane = threadIdx.x % kWarp;
  int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
       row < r.rows(); row += stride) {
    int64_t base = rowBase(r, row);
    float mx = -INFINITY;
    for (int64_t j = lane; j < r.len; j += kWarp)
      mx = softmaxMax(mx, value(base + j * r.inner));
    mx = warpMax(mx);
    float sum = 0.0f;
    for (int64_t j = lane; j < r.len; j += kWarp)
      sum += softmaxExpTerm(value(base + j * r.inner), mx);
    sum = warpSum(sum);
    float logSum = Log ? logOf(sum) : 0.0f;
    for (int64_t j = lane; j < r.len; j += kWarp) {
      int64_t k = base + j * r.inner;
      float v = value(k);
      typename Out::Storage out = Out::fromFloat(
          Log ? logSoftmaxValue(v, mx, logSum) : softmaxValue(v, mx, sum));
      y[k] = out;
      if (ylow)
        ylow[k] = Low::fromFloat(Out::toFloat(out));
    }
  }
}

// dx may be dy's or y's bytes (in place, as for softmaxKernel). dx is
// written as O: dy's type G (SoftmaxGrad, LogSoftmaxGrad), or y's type F
// (SoftmaxGradAs), or, given d (SoftmaxGradDiv, whose y is fp32, so the
// value is already in y's type), divided by *d in fp32 and converted to O.
template <bool Log, typename G, typename F, typename O>
__global__ void softmaxGradKernel(const typename G::Storage *dy,
                                  const typename F::Storage *y,
                                  const typename F::Storage *d,
                                  typename O::Storage *dx, AxisRows r) {
  float divisor = d ? F::toFloat(*d) : 1.0f;
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
      float v = softmaxGradValue<Log>(G::toFloat(dy[k]), F::toFloat(y[k]), sum);
      if (d)
        v = v / divisor;
      dx[k] = O::fromFloat(v);
    }
  }
}

unsigned rowGrid(int64_t rows) {
  int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return unsigned(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

} // namespace

void launchSoftmax(bool log, DType inT, const void *x, DType outT, void *y,
                   const AxisRows &r, cudaStream_t s, const void *divisor,
                   DType lowT, void *ylow) {
  if ((outT != inT && outT != DType::F32) ||
      (log && (outT != inT || divisor || ylow)) ||
      (ylow &&
       (outT != DType::F32 || (lowT != DType::F16 && lowT != DType::BF16))))
    throw Error(std::string(log ? "LogSoftmax" : "Softmax") +
                ": the cuda kernels write the input's dtype or (softmax) "
                "fp32, and an fp32 softmax's fp16 or bf16 copy; got " +
                dtypeName(inT) + " -> " + dtypeName(outT) +
                (ylow ? std::string(" and ") + dtypeName(lowT) : ""));
  if (r.rows() == 0 || r.len == 0)
    return;
  dispatchDeviceFloat(inT, "Softmax", [&](auto io) {
    using In = decltype(io);
    using S = typename In::Storage;
    auto *px = static_cast<const S *>(x);
    auto *pd = static_cast<const S *>(divisor);
    auto *pl = static_cast<uint16_t *>(ylow);
    auto *py32 = static_cast<float *>(y);
    unsigned grid = rowGrid(r.rows());
    // A Ylow exists only beside an fp32 Y (checked above).
    if (log)
      softmaxKernel<true, In, In><<<grid, kBlock, 0, s>>>(
          px, static_cast<S *>(y), nullptr, nullptr, r);
    else if (outT == DType::F32 && ylow && lowT == DType::BF16)
      softmaxKernel<false, In, F32Dev, BF16Dev>
          <<<grid, kBlock, 0, s>>>(px, py32, pd, pl, r);
    else if (outT == DType::F32)
      softmaxKernel<false, In, F32Dev>
          <<<grid, kBlock, 0, s>>>(px, py32, pd, pl, r);
    else
      softmaxKernel<false, In, In>
          <<<grid, kBlock, 0, s>>>(px, static_cast<S *>(y), pd, pl, r);
  });
  MPC_CUDA_CHECK_LAUNCH("softmaxKernel");
}

void launchSoftmaxGrad(bool log, DType gt, const void *dy, DType ft,
                       const void *y, DType outT, void *dx, const AxisRows &r,
                       cudaStream_t s) {
  bool asY = outT != gt;
  if (asY && (outT != ft || log))
    throw Error(std::string(log ? "LogSoftmaxGrad" : "SoftmaxGrad") +
                ": the cuda kernels write dY's dtype or (SoftmaxGradAs) Y's, "
                "got " +
                dtypeName(outT));
  if (r.rows() == 0 || r.len == 0)
    return;
  dispatchDeviceFloat(gt, "SoftmaxGrad", [&](auto gio) {
    using G = decltype(gio);
    dispatchDeviceFloat(ft, "SoftmaxGrad", [&](auto fio) {
      using F = decltype(fio);
      auto *pdy = static_cast<const typename G::Storage *>(dy);
      auto *py = static_cast<const typename F::Storage *>(y);
      unsigned grid = rowGrid(r.rows());
      if (asY)
        softmaxGradKernel<false, G, F, F><<<grid, kBlock, 0, s>>>(
            pdy, py, nullptr, static_cast<typename F::Storage *>(dx), r);
      else if (log)
        softmaxGradKernel<true, G, F, G><<<grid, kBlock, 0, s>>>(
            pdy, py, nullptr, static_cast<typename G::Storage *>(dx), r);
      else
        softmaxGradKernel<false, G, F, G><<<grid, kBlock, 0, s>>>(
            pdy, py, nullptr, static_cast<typename G::Storage *>(dx), r);
    });
  });
  MPC_CUDA_CHECK_LAUNCH("softmaxGradKernel");
}

void launchSoftmaxGradDiv(DType gradT, const void *dy, const float *y,
                          const float *d, DType outT, void *dx,
                          const AxisRows &r, cudaStream_t s) {
  if (r.rows() == 0 || r.len == 0)
    return;
  dispatchDeviceFloat(gradT, "SoftmaxGradDiv", [&](auto gio) {
    using G = decltype(gio);
    dispatchDeviceFloat(outT, "SoftmaxGradDiv", [&](auto oio) {
      using O = decltype(oio);
      softmaxGradKernel<false, G, F32Dev, O>
          <<<rowGrid(r.rows()), kBlock, 0, s>>>(
              static_cast<const typename G::Storage *>(dy), y, d,
              static_cast<typename O::Storage *>(dx), r);
    });
  });
  MPC_CUDA_CHECK_LAUNCH("softmaxGradKernel");
}

} // namespace cuda
} // namespace mpc
