// The dtype dispatch around vector_access.cuh's loops for kernels that map
// one float tensor (map) or zip dY with X (gradZip) through an fp32 functor:
// each dtype of fp32, fp16 or bf16 (others raise mpc::Error naming `what`),
// computed in fp32 and rounded once on store. Shared by the LeakyRelu
// (leaky_relu.cu) and Clip (clip_variadic.cu) kernels.
#pragma once

#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/vector_access.cuh"

namespace mpc {
namespace cuda {

template <typename Op>
void map(DType t, const void *x, void *y, int64_t n, cudaStream_t s,
         const char *what, Op op) {
  if (n == 0)
    return;
  dispatchDeviceFloat(t, what, [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    launchMap(static_cast<const S *>(x), static_cast<S *>(y), n, s,
              FloatMap<Io, Op>{op});
  });
}

/// dx = op(dy, x) over same-shape dY and X.
template <typename Op>
void gradZip(DType gradT, const void *dy, DType fwdT, const void *x, void *dx,
             int64_t n, cudaStream_t s, const char *what, Op op) {
  if (n == 0)
    return;
  dispatchDeviceFloat(gradT, what, [&](auto gio) {
    dispatchDeviceFloat(fwdT, what, [&](auto fio) {
      using G = decltype(gio);
      using F = decltype(fio);
      using GS = typename G::Storage;
      launchZip(static_cast<const GS *>(dy), true,
                static_cast<const typename F::Storage *>(x), true,
                static_cast<GS *>(dx), n, s, FloatZip<G, F, G, Op>{op});
    });
  });
}

} // namespace cuda
} // namespace mpc
