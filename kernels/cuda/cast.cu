// The CUDA Cast kernel: fp32 <-> fp16 <-> bf16, 16-byte vector accesses.
//
// mapKernel (vector_access.cuh) converts groups of 8 elements: 8 fp16/bf16
// are one 16-byte load or store, 8 fp32 are two. The vector path is taken
// when both pointers are 16-byte aligned (every allocation of the backend
// is); the last n % 8 elements, and unaligned buffers, take the scalar
// loop. The rounding is kernels/common/half.h's, so results equal the CPU
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

} // namespace

bool castSupported(DType from, DType to) {
  return deviceFloat(from) && deviceFloat(to);
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
