// The CUDA CumSum kernel: one thread per (outer, inner) line, scanning
// along the axis with the shared rule (kernels/common/cumsum_math.h).
#include "kernels/common/cumsum_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cumsum.h"
#include "kernels/cuda/device_io.cuh"

namespace mpc {
namespace cuda {
namespace {

template <typename Io>
__global__ void cumsumFloatKernel(const typename Io::Storage *x,
                                  typename Io::Storage *y, int64_t outer,
                                  int64_t len, int64_t inner, bool exclusive,
                                  bool reverse) {
  for (int64_t line = globalIndex(); line < outer * inner;
       line += globalStride()) {
    int64_t base = (line / inner) * len * inner + line % inner;
    cumsumLine<float>(
        len, exclusive, reverse,
        [&](int64_t t) { return Io::toFloat(x[base + t * inner]); },
        [&](int64_t t, float v) { y[base + t * inner] = Io::fromFloat(v); });
  }
}

template <typename T>
__global__ void cumsumIntKernel(const T *x, T *y, int64_t outer, int64_t len,
                                int64_t inner, bool exclusive, bool reverse) {
  for (int64_t line = globalIndex(); line < outer * inner;
       line += globalStride()) {
    int64_t base = (line / inner) * len * inner + line % inner;
    cumsumLine<int64_t>(
        len, exclusive, reverse,
        [&](int64_t t) { return int64_t(x[base + t * inner]); },
        [&](int64_t t, int64_t v) { y[base + t * inner] = T(v); });
  }
}

} // namespace

bool cumsumSupported(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
         t == DType::I64 || t == DType::I32;
}

void launchCumSum(DType t, const void *x, void *y, int64_t outer, int64_t len,
                  int64_t inner, bool exclusive, bool reverse, cudaStream_t s) {
  int64_t lines = outer * inner;
  if (lines == 0 || len == 0)
    return;
  unsigned grid = gridFor(lines);
  if (t == DType::I64) {
    cumsumIntKernel<<<grid, kBlock, 0, s>>>(static_cast<const int64_t *>(x),
                                            static_cast<int64_t *>(y), outer,
                                            len, inner, exclusive, reverse);
  } else if (t == DType::I32) {
    cumsumIntKernel<<<grid, kBlock, 0, s>>>(static_cast<const int32_t *>(x),
                                            static_cast<int32_t *>(y), outer,
                                            len, inner, exclusive, reverse);
  } else {
    dispatchDeviceFloat(t, "CumSum", [&](auto io) {
      using Io = decltype(io);
      using S = typename Io::Storage;
      cumsumFloatKernel<Io><<<grid, kBlock, 0, s>>>(
          static_cast<const S *>(x), static_cast<S *>(y), outer, len, inner,
          exclusive, reverse);
    });
  }
  MPC_CUDA_CHECK_LAUNCH("cumsumKernel");
}

} // namespace cuda
} // namespace mpc
