// The CUDA selection kernels: ArgMax/ArgMin (one thread per line) and TopK
// (one thread per element, placed by counting what comes before it). The
// order is kernels/common/select_math.h's, the CPU kernels'; fp16 and bf16
// compare as fp32 (exact), integers as int64.
#include "kernels/common/select_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/topk.h"

namespace mpc {
namespace cuda {
namespace {

/// Loads of integer storage, compared exactly as int64.
template <typename T, DType D> struct IntDev {
  using Storage = T;
  static constexpr DType dtype = D;
  __device__ static int64_t key(T s) { return int64_t(s); }
};
/// Loads of floating storage, compared as fp32.
template <typename Io> struct FloatKey : Io {
  __device__ static float key(typename Io::Storage s) { return Io::toFloat(s); }
};

template <typename Io>
__global__ void argExtremumKernel(const typename Io::Storage *x, int64_t *y,
                                  int64_t outer, int64_t len, int64_t inner,
                                  bool max, bool last) {
  for (int64_t line = globalIndex(); line < outer * inner;
       line += globalStride()) {
    int64_t base = (line / inner) * len * inner + line % inner, at = 0;
    auto best = Io::key(x[base]);
    for (int64_t j = 1; j < len; ++j) {
      auto v = Io::key(x[base + j * inner]);
      if (argReplaces(v, best, max, last)) {
        best = v;
        at = j;
      }
    }
    y[line] = at;
  }
}

template <typename Io>
__global__ void topkKernel(const typename Io::Storage *x,
                           typename Io::Storage *values, int64_t *indices,
                           int64_t outer, int64_t len, int64_t inner, int64_t k,
                           bool largest) {
  for (int64_t e = globalIndex(); e < outer * len * inner;
       e += globalStride()) {
    int64_t o = e / (len * inner), j = e / inner % len, i = e % inner;
    int64_t base = o * len * inner + i;
    auto v = Io::key(x[e]);
    int64_t place = 0;
    for (int64_t p = 0; p < len && place < k; ++p)
      place += topkBefore(Io::key(x[base + p * inner]), p, v, j, largest);
    if (place >= k)
      continue;
    int64_t to = (o * k + place) * inner + i;
    if (values)
      values[to] = x[e];
    if (indices)
      indices[to] = j;
  }
}

/// Calls f(Io{}) with the key type of dtype t.
template <typename F> void dispatchSelect(DType t, F &&f) {
  switch (t) {
  case DType::I64:
    return f(IntDev<int64_t, DType::I64>{});
  case DType::I32:
    return f(IntDev<int32_t, DType::I32>{});
  default:
    return dispatchDeviceFloat(t, "TopK/ArgMax/ArgMin",
                               [&](auto io) { f(FloatKey<decltype(io)>{}); });
  }
}

} // namespace

bool selectSupported(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
         t == DType::I64 || t == DType::I32;
}

void launchArgExtremum(DType t, const void *x, int64_t *y, int64_t outer,
                       int64_t len, int64_t inner, bool max, bool last,
                       cudaStream_t s) {
  if (outer * inner == 0 || len == 0)
    return;
  dispatchSelect(t, [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    argExtremumKernel<Io><<<gridFor(outer * inner), kBlock, 0, s>>>(
        static_cast<const S *>(x), y, outer, len, inner, max, last);
  });
  MPC_CUDA_CHECK_LAUNCH("argExtremumKernel");
}

void launchTopK(DType t, const void *x, void *values, int64_t *indices,
                int64_t outer, int64_t len, int64_t inner, int64_t k,
                bool largest, cudaStream_t s) {
  if (outer * inner == 0 || len == 0 || k == 0)
    return;
  dispatchSelect(t, [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    topkKernel<Io><<<gridFor(outer * len * inner), kBlock, 0, s>>>(
        static_cast<const S *>(x), static_cast<S *>(values), indices, outer,
        len, inner, k, largest);
  });
  MPC_CUDA_CHECK_LAUNCH("topkKernel");
}

} // namespace cuda
} // namespace mpc
