// CUDA GELU kernels: the shared formulas of kernels/common/gelu_math.h in
// fp32, rounded once on store, through the 16-byte elementwise loops of
// vector_access.cuh (launchMap, launchZip).
#include "kernels/common/gelu_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/vector_access.cuh"

namespace mpc {
namespace cuda {
namespace {

/// The forward's fp32 math, applied by launchMap's 16-byte loop.
struct GeluOp {
  bool tanhForm;
  __device__ float operator()(float v) const {
    return geluForward(v, tanhForm);
  }
};

/// The gradient's fp32 math on (dY, X), applied by launchZip.
template <GeluGradKind K> struct GeluGradOp {
  __device__ float operator()(float g, float v) const {
    return K == GeluGradKind::Erf
               ? erfGradValue(g, v)
               : g * geluDerivative(v, K == GeluGradKind::GeluTanh);
  }
};

template <GeluGradKind K>
void geluGrad(DType gt, const void *dy, DType ft, const void *x, void *dx,
              int64_t n, cudaStream_t s) {
  dispatchDeviceFloat(gt, "GeluGrad", [&](auto gio) {
    using G = decltype(gio);
    dispatchDeviceFloat(ft, "GeluGrad", [&](auto fio) {
      using Fw = decltype(fio);
      launchZip(static_cast<const typename G::Storage *>(dy), true,
                static_cast<const typename Fw::Storage *>(x), true,
                static_cast<typename G::Storage *>(dx), n, s,
                FloatZip<G, Fw, G, GeluGradOp<K>>{GeluGradOp<K>{}});
    });
  });
}

} // namespace

void launchGelu(DType t, const void *x, void *y, int64_t n, bool tanhForm,
                cudaStream_t s) {
  if (n == 0)
    return;
  dispatchDeviceFloat(t, "Gelu", [&](auto io) {
    using Io = decltype(io);
    launchMap(static_cast<const typename Io::Storage *>(x),
              static_cast<typename Io::Storage *>(y), n, s,
              FloatMap<Io, GeluOp>{GeluOp{tanhForm}});
  });
}

void launchGeluGrad(GeluGradKind kind, DType gt, const void *dy, DType ft,
                    const void *x, void *dx, int64_t n, cudaStream_t s) {
  if (n == 0)
    return;
  switch (kind) {
  case GeluGradKind::Gelu:
    return geluGrad<GeluGradKind::Gelu>(gt, dy, ft, x, dx, n, s);
  case GeluGradKind::GeluTanh:
    return geluGrad<GeluGradKind::GeluTanh>(gt, dy, ft, x, dx, n, s);
  case GeluGradKind::Erf:
    return geluGrad<GeluGradKind::Erf>(gt, dy, ft, x, dx, n, s);
  }
}

} // namespace cuda
} // namespace mpc
