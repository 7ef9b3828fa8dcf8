// The CUDA Range kernel: one thread per element of the sequence.
//
// The floating value is start + double(i) * delta, a multiply and an add
// rounded separately (the library builds with --fmad=false, so nvcc does
// not contract them into an fma the CPU would not use), then narrowed as
// Tensor::setFromDouble narrows: once to fp16/bf16, through fp32 rounded
// to odd (ir/round_to_odd.h).
#include "ir/round_to_odd.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/range.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T> struct Narrow {
  __device__ static T from(double v) { return T(v); }
};
template <typename Io> struct NarrowHalf {
  __device__ static uint16_t from(double v) {
    return Io::fromFloat(roundToOddFloat(v));
  }
};

template <typename T, typename N>
__global__ void rangeFloatKernel(T *__restrict__ y, int64_t n, double start,
                                 double delta) {
  for (int64_t i = globalIndex(); i < n; i += globalStride())
    y[i] = N::from(start + double(i) * delta);
}

/// int32 goes through double, as the CPU's setFromDouble does.
template <typename T>
__global__ void rangeIntKernel(T *__restrict__ y, int64_t n, int64_t start,
                               int64_t delta) {
  for (int64_t i = globalIndex(); i < n; i += globalStride())
    y[i] = T(double(start + i * delta));
}

} // namespace

bool rangeSupported(DType t) {
  return t == DType::I64 || t == DType::I32 || t == DType::F64 ||
         t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

void launchRange(DType t, void *y, int64_t n, double start, double delta,
                 int64_t startInt, int64_t deltaInt, cudaStream_t s) {
  if (n == 0)
    return;
  unsigned grid = gridFor(n);
  switch (t) {
  case DType::I64:
    rangeIntKernel<<<grid, kBlock, 0, s>>>(static_cast<int64_t *>(y), n,
                                           startInt, deltaInt);
    break;
  case DType::I32:
    rangeIntKernel<<<grid, kBlock, 0, s>>>(static_cast<int32_t *>(y), n,
                                           startInt, deltaInt);
    break;
  case DType::F64:
    rangeFloatKernel<double, Narrow<double>>
        <<<grid, kBlock, 0, s>>>(static_cast<double *>(y), n, start, delta);
    break;
  case DType::F32:
    rangeFloatKernel<float, Narrow<float>>
        <<<grid, kBlock, 0, s>>>(static_cast<float *>(y), n, start, delta);
    break;
  case DType::F16:
    rangeFloatKernel<uint16_t, NarrowHalf<F16Dev>>
        <<<grid, kBlock, 0, s>>>(static_cast<uint16_t *>(y), n, start, delta);
    break;
  case DType::BF16:
    rangeFloatKernel<uint16_t, NarrowHalf<BF16Dev>>
        <<<grid, kBlock, 0, s>>>(static_cast<uint16_t *>(y), n, start, delta);
    break;
  default:
    throw Error(std::string("Range: the cuda kernel writes int64, int32, "
                            "fp64, fp32, fp16 or bf16, got ") +
                dtypeName(t));
  }
  MPC_CUDA_CHECK_LAUNCH("rangeKernel");
}

} // namespace cuda
} // namespace mpc
