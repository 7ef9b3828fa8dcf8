// The kernels around cuDNN's convolutions: a shifted N-d copy (pad or
// crop) and the per-channel bias. One thread per output element.
#include "kernels/cuda/conv_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"

#include <string>

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__global__ void shiftCopyKernel(const T *__restrict__ src, T *__restrict__ dst,
                                int64_t total, ShiftGeometry g) {
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    int64_t from = shiftSource(g, i);
    dst[i] = from >= 0 ? src[from] : T(0);
  }
}

__global__ void channelBiasKernel(DType yType, void *__restrict__ y,
                                  DType biasType, const void *__restrict__ bias,
                                  int64_t total, int64_t channels,
                                  int64_t inner) {
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    int64_t c = (i / inner) % channels;
    storeAs(yType, y, i, loadAs(yType, y, i) + loadAs(biasType, bias, c));
  }
}

} // namespace

ShiftGeometry makeShiftGeometry(const std::vector<int64_t> &srcDims,
                                const std::vector<int64_t> &dstDims,
                                const std::vector<int64_t> &offset) {
  if (srcDims.size() != dstDims.size() || offset.size() != dstDims.size() ||
      dstDims.size() > size_t(kMaxKernelRank))
    throw Error("internal error: a shifted copy of mismatched ranks");
  ShiftGeometry g;
  g.rank = int(dstDims.size());
  for (int d = 0; d < g.rank; ++d) {
    g.src[d] = srcDims[size_t(d)];
    g.dst[d] = dstDims[size_t(d)];
    g.offset[d] = offset[size_t(d)];
  }
  return g;
}

void launchShiftCopy(size_t elementSize, const void *src,
                     const std::vector<int64_t> &srcDims, void *dst,
                     const std::vector<int64_t> &dstDims,
                     const std::vector<int64_t> &offset, cudaStream_t stream) {
  ShiftGeometry g = makeShiftGeometry(srcDims, dstDims, offset);
  int64_t total = 1;
  for (int64_t d : dstDims)
    total *= d;
  if (total == 0)
    return;
  if (elementSize == 4)
    shiftCopyKernel<<<gridFor(total), kBlock, 0, stream>>>(
        static_cast<const uint32_t *>(src), static_cast<uint32_t *>(dst), total,
        g);
  else if (elementSize == 2)
    shiftCopyKernel<<<gridFor(total), kBlock, 0, stream>>>(
        static_cast<const uint16_t *>(src), static_cast<uint16_t *>(dst), total,
        g);
  else
    throw Error("internal error: a shifted copy of " +
                std::to_string(elementSize) + "-byte elements");
  MPC_CUDA_CHECK_LAUNCH("shiftCopyKernel");
}

void launchChannelBias(DType yType, void *y, DType biasType, const void *bias,
                       int64_t n, int64_t channels, int64_t inner,
                       cudaStream_t stream) {
  requireDeviceFloat(yType, "bias output");
  requireDeviceFloat(biasType, "bias");
  int64_t total = n * channels * inner;
  if (total == 0)
    return;
  channelBiasKernel<<<gridFor(total), kBlock, 0, stream>>>(
      yType, y, biasType, bias, total, channels, inner);
  MPC_CUDA_CHECK_LAUNCH("channelBiasKernel");
}

} // namespace cuda
} // namespace mpc
