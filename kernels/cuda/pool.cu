// CUDA pooling kernels: one thread per output element for the forwards,
// one per input element for the gradients, one per plane for the global
// average. The per-element math is kernels/cuda/pool_window.h's.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/pool_window.h"

#include <cmath>

namespace mpc {
namespace cuda {
namespace {

__global__ void maxPoolKernel(DType t, const void *__restrict__ x,
                              void *__restrict__ y, int64_t *indices,
                              PoolWindow w) {
  int64_t total = w.planes * w.outCount;
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    int64_t plane = i / w.outCount, base = plane * w.inCount;
    auto load = [&](int64_t j) { return loadAs(t, x, base + j); };
    int64_t idx = poolArgmax(w, load, i % w.outCount);
    storeAs(t, y, i, idx >= 0 ? load(idx) : -INFINITY);
    if (indices)
      indices[i] = poolIndicesValue(w, plane, idx);
  }
}

__global__ void argmaxKernel(DType t, const void *__restrict__ x,
                             int64_t *__restrict__ argmax, PoolWindow w) {
  int64_t total = w.planes * w.outCount;
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    int64_t base = i / w.outCount * w.inCount;
    auto load = [&](int64_t j) { return loadAs(t, x, base + j); };
    argmax[i] = poolArgmax(w, load, i % w.outCount);
  }
}

__global__ void maxPoolGradKernel(DType dyType, const void *__restrict__ dy,
                                  void *__restrict__ dx,
                                  const int64_t *__restrict__ argmax,
                                  PoolWindow w) {
  int64_t total = w.planes * w.inCount;
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    int64_t outBase = i / w.inCount * w.outCount;
    auto pick = [&](int64_t p) { return argmax[outBase + p]; };
    auto loadDy = [&](int64_t p) { return loadAs(dyType, dy, outBase + p); };
    storeAs(dyType, dx, i, maxPoolGradValue(w, pick, loadDy, i % w.inCount));
  }
}

__global__ void averagePoolKernel(DType t, const void *__restrict__ x,
                                  void *__restrict__ y, PoolWindow w) {
  int64_t total = w.planes * w.outCount;
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    int64_t base = i / w.outCount * w.inCount;
    auto load = [&](int64_t j) { return loadAs(t, x, base + j); };
    storeAs(t, y, i, averagePoolValue(w, load, i % w.outCount));
  }
}

__global__ void averagePoolGradKernel(DType t, const void *__restrict__ dy,
                                      void *__restrict__ dx, PoolWindow w) {
  int64_t total = w.planes * w.inCount;
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    int64_t outBase = i / w.inCount * w.outCount;
    auto loadDy = [&](int64_t p) { return loadAs(t, dy, outBase + p); };
    storeAs(t, dx, i, averagePoolGradValue(w, loadDy, i % w.inCount));
  }
}

__global__ void globalAveragePoolKernel(DType t, const void *__restrict__ x,
                                        void *__restrict__ y, int64_t planes,
                                        int64_t size) {
  for (int64_t i = globalIndex(); i < planes; i += globalStride()) {
    // In index order from 0, as the CPU adds.
    float sum = 0.0f;
    for (int64_t j = 0; j < size; ++j)
      sum += loadAs(t, x, i * size + j);
    storeAs(t, y, i, size ? sum / float(size) : 0.0f);
  }
}

} // namespace

void launchMaxPool(DType t, const void *x, void *y, int64_t *indices,
                   const PoolWindow &w, cudaStream_t stream) {
  requireDeviceFloat(t, "MaxPool");
  int64_t work = w.planes * w.outCount;
  if (work == 0)
    return;
  maxPoolKernel<<<gridFor(work), kBlock, 0, stream>>>(t, x, y, indices, w);
  MPC_CUDA_CHECK_LAUNCH("maxPoolKernel");
}

void launchMaxPoolGrad(DType dyType, const void *dy, DType xType, const void *x,
                       void *dx, int64_t *argmax, const PoolWindow &w,
                       cudaStream_t stream) {
  requireDeviceFloat(dyType, "MaxPoolGrad dY");
  requireDeviceFloat(xType, "MaxPoolGrad X");
  int64_t outs = w.planes * w.outCount, ins = w.planes * w.inCount;
  if (ins == 0)
    return;
  if (outs > 0) {
    argmaxKernel<<<gridFor(outs), kBlock, 0, stream>>>(xType, x, argmax, w);
    MPC_CUDA_CHECK_LAUNCH("argmaxKernel");
  }
  maxPoolGradKernel<<<gridFor(ins), kBlock, 0, stream>>>(dyType, dy, dx, argmax,
                                                         w);
  MPC_CUDA_CHECK_LAUNCH("maxPoolGradKernel");
}

void launchAveragePool(DType t, const void *x, void *y, const PoolWindow &w,
                       cudaStream_t stream) {
  requireDeviceFloat(t, "AveragePool");
  int64_t work = w.planes * w.outCount;
  if (work == 0)
    return;
  averagePoolKernel<<<gridFor(work), kBlock, 0, stream>>>(t, x, y, w);
  MPC_CUDA_CHECK_LAUNCH("averagePoolKernel");
}

void launchAveragePoolGrad(DType t, const void *dy, void *dx,
                           const PoolWindow &w, cudaStream_t stream) {
  requireDeviceFloat(t, "AveragePoolGrad");
  int64_t work = w.planes * w.inCount;
  if (work == 0)
    return;
  averagePoolGradKernel<<<gridFor(work), kBlock, 0, stream>>>(t, dy, dx, w);
  MPC_CUDA_CHECK_LAUNCH("averagePoolGradKernel");
}

void launchGlobalAveragePool(DType t, const void *x, void *y, int64_t planes,
                             int64_t size, cudaStream_t stream) {
  requireDeviceFloat(t, "GlobalAveragePool");
  if (planes == 0)
    return;
  globalAveragePoolKernel<<<gridFor(planes), kBlock, 0, stream>>>(t, x, y,
                                                                  planes, size);
  MPC_CUDA_CHECK_LAUNCH("globalAveragePoolKernel");
}

} // namespace cuda
} // namespace mpc
