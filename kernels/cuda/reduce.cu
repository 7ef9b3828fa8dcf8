// The CUDA reduction kernels: SumToShape, ReduceSum/Mean/Max, ReduceGrad,
// ReduceExtremumGrad.
//
// One thread per output element: it walks its contributions in the input's
// row-major order and combines them in fp32, which is the order the CPU
// backend uses (kernels/cpu/reduce.cpp, mpc_grad.cpp), so the results are
// the same bits. Adjacent threads read adjacent elements (coalesced) when
// the kept axes are the inner ones, as for a bias gradient; a reduction
// over the innermost axis of a large tensor is slow this way, which a
// later increment can split per warp if a model needs it.
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

__global__ void sumToShapeAsKernel(DType gt, const void *__restrict__ dy,
                                   DType ot, void *__restrict__ dx,
                                   SumToShapeGeometry g) {
  for (int64_t o = globalIndex(); o < g.outCount; o += globalStride()) {
    int64_t base = g.base(o);
    float acc = 0.0f;
    for (int64_t r = 0; r < g.reducedCount; ++r)
      acc += loadAs(gt, dy, base + g.reduced(r));
    storeAs(ot, dx, o, acc);
  }
}

template <ReduceKind K>
__global__ void reduceKernel(DType t, const void *__restrict__ x,
                             void *__restrict__ y, SumToShapeGeometry g) {
  for (int64_t o = globalIndex(); o < g.outCount; o += globalStride()) {
    int64_t base = g.base(o);
    float acc = K == ReduceKind::Max ? -INFINITY : 0.0f;
    for (int64_t r = 0; r < g.reducedCount; ++r) {
      float v = loadAs(t, x, base + g.reduced(r));
      if (K == ReduceKind::Max) {
        if (v > acc || v != v) // NaN wins and then stays
          acc = acc != acc ? acc : v;
      } else {
        acc += v;
      }
    }
    if (K == ReduceKind::Mean)
      acc = acc / float(g.reducedCount);
    storeAs(t, y, o, acc);
  }
}

__global__ void reduceGradKernel(DType t, const void *__restrict__ dy,
                                 void *__restrict__ dx, BroadcastGeometry<1> g,
                                 bool mean, float count) {
  for (int64_t i = globalIndex(); i < g.count; i += globalStride()) {
    int64_t off[1];
    g.offsets(i, off);
    float v = loadAs(t, dy, off[0]);
    storeAs(t, dx, i, mean ? v / count : v);
  }
}

/// One thread per group: counts the group's elements equal to its
/// extremum, then writes every element of the group (each element of X is
/// in one group, so each is written once).
__global__ void reduceExtremumGradKernel(DType gt, const void *__restrict__ dy,
                                         DType xt, const void *__restrict__ x,
                                         DType yt, const void *__restrict__ y,
                                         void *__restrict__ dx,
                                         SumToShapeGeometry g) {
  for (int64_t o = globalIndex(); o < g.outCount; o += globalStride()) {
    int64_t base = g.base(o);
    float extremum = loadAs(yt, y, o), ties = 0.0f;
    for (int64_t r = 0; r < g.reducedCount; ++r)
      if (loadAs(xt, x, base + g.reduced(r)) == extremum)
        ties += 1.0f;
    float share = loadAs(gt, dy, o) / ties;
    for (int64_t r = 0; r < g.reducedCount; ++r) {
      int64_t k = base + g.reduced(r);
      storeAs(gt, dx, k, loadAs(xt, x, k) == extremum ? share : 0.0f);
    }
  }
}

} // namespace

void launchReduceExtremumGrad(DType dyType, const void *dy, DType xType,
                              const void *x, DType yType, const void *y,
                              void *dx, const SumToShapeGeometry &g,
                              cudaStream_t s) {
  if (g.outCount == 0 || g.reducedCount == 0)
    return;
  requireDeviceFloat(dyType, "ReduceExtremumGrad");
  requireDeviceFloat(xType, "ReduceExtremumGrad");
  requireDeviceFloat(yType, "ReduceExtremumGrad");
  reduceExtremumGradKernel<<<gridFor(g.outCount), kBlock, 0, s>>>(
      dyType, dy, xType, x, yType, y, dx, g);
  MPC_CUDA_CHECK_LAUNCH("reduceExtremumGradKernel");
}

void launchReduce(ReduceKind kind, DType t, const void *x, void *y,
                  const SumToShapeGeometry &g, cudaStream_t s) {
  if (g.outCount == 0)
    return;
  requireDeviceFloat(t, "Reduce");
  unsigned grid = gridFor(g.outCount);
  switch (kind) {
  case ReduceKind::Sum:
    reduceKernel<ReduceKind::Sum><<<grid, kBlock, 0, s>>>(t, x, y, g);
    break;
  case ReduceKind::Mean:
    reduceKernel<ReduceKind::Mean><<<grid, kBlock, 0, s>>>(t, x, y, g);
    break;
  case ReduceKind::Max:
    reduceKernel<ReduceKind::Max><<<grid, kBlock, 0, s>>>(t, x, y, g);
    break;
  }
  MPC_CUDA_CHECK_LAUNCH("reduceKernel");
}

void launchReduceGrad(DType t, const void *dy, void *dx,
                      const BroadcastGeometry<1> &g, bool mean, int64_t count,
                      cudaStream_t s) {
  if (g.count == 0)
    return;
  requireDeviceFloat(t, "ReduceGrad");
  reduceGradKernel<<<gridFor(g.count), kBlock, 0, s>>>(t, dy, dx, g, mean,
                                                       float(count));
  MPC_CUDA_CHECK_LAUNCH("reduceGradKernel");
}

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

void launchSumToShapeAs(DType dyType, const void *dy, DType dxType, void *dx,
                        const SumToShapeGeometry &g, cudaStream_t s) {
  if (g.outCount == 0)
    return;
  requireDeviceFloat(dyType, "SumToShapeAs");
  requireDeviceFloat(dxType, "SumToShapeAs");
  sumToShapeAsKernel<<<gridFor(g.outCount), kBlock, 0, s>>>(dyType, dy, dxType,
                                                            dx, g);
  MPC_CUDA_CHECK_LAUNCH("sumToShapeAsKernel");
}

} // namespace cuda
} // namespace mpc
