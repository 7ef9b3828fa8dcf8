// The CUDA Cast kernel: fp32 <-> fp16 <-> bf16, 16-byte vector accesses;
// bool <-> those floats (masks: stochastic depth's Cast of its draw) and
// int64/int32 -> fp32 (counts read from shapes) one element per thread.
//
// mapKernel (vector_access.cuh) converts groups of 8 elements: 8 fp16/bf16
// are one 16-byte load or store, 8 fp32 are two. The vector path is taken
// when both pointers are 16-byte aligned (every allocation of the backend
// is); the last n % 8 elements, and unaligned buffers, take the scalar
// loop. The rounding is ir/half.h's, so results equal the CPU
// backend's bit for bit, NaNs included.
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/vector_access.cuh"

namespace mpc {
namespace cuda {
namespace {

/// One element converted through fp32, rounded once to Dst.
template <typename Src, typename Dst> struct Convert {
  __device__ typename Dst::Storage operator()(typename Src::Storage v) const {
    return Dst::fromFloat(Src::toFloat(v));
  }
};

bool deviceFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

/// bool -> float: 1 or 0, exact in every float dtype.
__global__ void boolToFloatKernel(DType to, const uint8_t *__restrict__ x,
                                  void *__restrict__ y, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride())
    storeAs(to, y, i, x[i] ? 1.0f : 0.0f);
}

/// float -> bool: true where the value is not zero (NaN too), as the CPU
/// kernel's v != 0.
__global__ void floatToBoolKernel(DType from, const void *__restrict__ x,
                                  uint8_t *__restrict__ y, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride())
    y[i] = loadAs(from, x, i) != 0.0f ? 1 : 0;
}

/// int64/int32/fp64 -> fp32, rounded to nearest-even as the CPU kernel's
/// float(v): counts read from a shape (--sync-batchnorm's element count), a
/// scheduled learning rate (Adafactor reads it in fp32).
template <typename I>
__global__ void intToFloatKernel(const I *__restrict__ x, float *__restrict__ y,
                                 int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride())
    y[i] = float(x[i]);
}

bool integer(DType t) { return t == DType::I64 || t == DType::I32; }

/// The types whose one cast is to fp32.
bool toFp32Only(DType t) { return integer(t) || t == DType::F64; }

} // namespace

bool castSupported(DType from, DType to) {
  if (toFp32Only(from))
    return to == DType::F32;
  return (deviceFloat(from) || from == DType::Bool) &&
         (deviceFloat(to) || to == DType::Bool);
}

void launchCast(DType from, DType to, const void *x, void *y, int64_t n,
                cudaStream_t s) {
  if (n == 0)
    return;
  if (from == to) {
    MPC_CUDA_CHECK(cudaMemcpyAsync(y, x, size_t(n) * dtypeSize(from),
                                   cudaMemcpyDeviceToDevice, s));
    return;
  }
  if (toFp32Only(from)) {
    if (from == DType::I64)
      intToFloatKernel<<<gridFor(n), kBlock, 0, s>>>(
          static_cast<const int64_t *>(x), static_cast<float *>(y), n);
    else if (from == DType::F64)
      intToFloatKernel<<<gridFor(n), kBlock, 0, s>>>(
          static_cast<const double *>(x), static_cast<float *>(y), n);
    else
      intToFloatKernel<<<gridFor(n), kBlock, 0, s>>>(
          static_cast<const int32_t *>(x), static_cast<float *>(y), n);
    MPC_CUDA_CHECK_LAUNCH("intToFloatKernel");
    return;
  }
  if (from == DType::Bool || to == DType::Bool) {
    if (from == DType::Bool)
      boolToFloatKernel<<<gridFor(n), kBlock, 0, s>>>(
          to, static_cast<const uint8_t *>(x), y, n);
    else
      floatToBoolKernel<<<gridFor(n), kBlock, 0, s>>>(
          from, x, static_cast<uint8_t *>(y), n);
    MPC_CUDA_CHECK_LAUNCH("castBoolKernel");
    return;
  }
  dispatchDeviceFloat(from, "Cast", [&](auto src) {
    dispatchDeviceFloat(to, "Cast", [&](auto dst) {
      using Src = decltype(src);
      using Dst = decltype(dst);
      launchMap(static_cast<const typename Src::Storage *>(x),
                static_cast<typename Dst::Storage *>(y), n, s,
                Convert<Src, Dst>{});
    });
  });
}

} // namespace cuda
} // namespace mpc
