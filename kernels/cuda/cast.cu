// The CUDA Cast kernel: fp32 <-> fp16 <-> bf16, 16-byte vector accesses.
//
// Each thread converts groups of 8 elements: 8 fp16/bf16 are one 16-byte
// load or store, 8 fp32 are two. The vector path is taken when both
// pointers are 16-byte aligned (every allocation of the backend is); the
// last n % 8 elements, and unaligned buffers, take the scalar loop. The
// rounding is kernels/common/half.h's, so results equal the CPU backend's
// bit for bit, NaNs included.
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"

namespace mpc {
namespace cuda {
namespace {

constexpr int kGroup = 8;

/// kGroup elements of one storage type, aligned for 16-byte accesses.
template <typename T> struct alignas(16) Group { T v[kGroup]; };

template <typename Src, typename Dst>
__global__ void castKernel(const typename Src::Storage *__restrict__ x,
                           typename Dst::Storage *__restrict__ y, int64_t n,
                           bool vectorised) {
  using S = typename Src::Storage;
  using D = typename Dst::Storage;
  int64_t first = 0;
  if (vectorised) {
    int64_t groups = n / kGroup;
    const auto *gx = reinterpret_cast<const Group<S> *>(x);
    auto *gy = reinterpret_cast<Group<D> *>(y);
    for (int64_t g = globalIndex(); g < groups; g += globalStride()) {
      Group<S> in = gx[g];
      Group<D> out;
#pragma unroll
      for (int k = 0; k < kGroup; ++k)
        out.v[k] = Dst::fromFloat(Src::toFloat(in.v[k]));
      gy[g] = out;
    }
    first = groups * kGroup;
  }
  for (int64_t i = first + globalIndex(); i < n; i += globalStride())
    y[i] = Dst::fromFloat(Src::toFloat(x[i]));
}

bool aligned16(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

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
  bool vectorised = aligned16(x) && aligned16(y);
  int64_t work = vectorised ? n / kGroup + n % kGroup : n;
  dispatchDeviceFloat(from, "Cast", [&](auto src) {
    dispatchDeviceFloat(to, "Cast", [&](auto dst) {
      using Src = decltype(src);
      using Dst = decltype(dst);
      castKernel<Src, Dst><<<gridFor(work), kBlock, 0, s>>>(
          static_cast<const typename Src::Storage *>(x),
          static_cast<typename Dst::Storage *>(y), n, vectorised);
    });
  });
  MPC_CUDA_CHECK_LAUNCH("castKernel");
}

} // namespace cuda
} // namespace mpc
