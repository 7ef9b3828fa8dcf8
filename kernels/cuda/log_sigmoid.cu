// CUDA log-sigmoid kernels: the shared formulas of
// kernels/common/log_sigmoid_math.h in fp32, rounded once on store, through
// the 16-byte elementwise loops of vector_access.cuh (launchMap, launchZip).
#include "kernels/common/log_sigmoid_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/log_sigmoid.h"
#include "kernels/cuda/vector_access.cuh"

namespace mpc {
namespace cuda {
namespace {

struct LogSigmoidOp {
  __device__ float operator()(float v) const { return logSigmoidValue(v); }
};

struct LogSigmoidGradOp {
  __device__ float operator()(float g, float v) const {
    return logSigmoidGradValue(g, v);
  }
};

} // namespace

void launchLogSigmoid(DType t, const void *x, void *y, int64_t n,
                      cudaStream_t s) {
  if (n == 0)
    return;
  dispatchDeviceFloat(t, "LogSigmoid", [&](auto io) {
    using Io = decltype(io);
    launchMap(static_cast<const typename Io::Storage *>(x),
              static_cast<typename Io::Storage *>(y), n, s,
              FloatMap<Io, LogSigmoidOp>{LogSigmoidOp{}});
  });
}

void launchLogSigmoidGrad(DType gt, const void *dy, DType ft, const void *x,
                          void *dx, int64_t n, cudaStream_t s) {
  if (n == 0)
    return;
  dispatchDeviceFloat(gt, "LogSigmoidGrad", [&](auto gio) {
    using G = decltype(gio);
    dispatchDeviceFloat(ft, "LogSigmoidGrad", [&](auto fio) {
      using Fw = decltype(fio);
      launchZip(static_cast<const typename G::Storage *>(dy), true,
                static_cast<const typename Fw::Storage *>(x), true,
                static_cast<typename G::Storage *>(dx), n, s,
                FloatZip<G, Fw, G, LogSigmoidGradOp>{LogSigmoidGradOp{}});
    });
  });
}

} // namespace cuda
} // namespace mpc
