// CUDA mpc.AddTo: an fp32 add of operands widened as read (fp32, fp16 or
// bf16 each), rounded once to `to` on store, and the Cast down of that
// stored sum beside it. The conversions are device_io.cuh's (the Cast
// kernel's bits), the add an IEEE fp32 add: the CPU kernel's bits.
#include "kernels/cuda/add_to.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"

#include <string>

namespace mpc {
namespace cuda {
namespace {

__global__ void addToKernel(DType ta, const void *a, DType tb, const void *b,
                            DType tc, void *c, DType lowT, void *low,
                            int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    float sum = loadAs(ta, a, i) + loadAs(tb, b, i);
    storeAs(tc, c, i, sum);
    if (low) // the Cast of C as stored
      storeAs(lowT, low, i, tc == DType::F32 ? sum : loadAs(tc, c, i));
  }
}

} // namespace

void launchAddTo(DType ta, const void *a, DType tb, const void *b, DType tc,
                 void *c, DType lowT, void *low, int64_t n, cudaStream_t s) {
  for (DType t : {ta, tb, tc})
    requireDeviceFloat(t, "AddTo");
  if (low && lowT != DType::F16 && lowT != DType::BF16)
    throw Error(std::string("AddTo: the cuda kernel writes Clow in fp16 or "
                            "bf16, got ") +
                dtypeName(lowT));
  if (n == 0)
    return;
  addToKernel<<<gridFor(n), kBlock, 0, s>>>(ta, a, tb, b, tc, c, lowT, low, n);
  MPC_CUDA_CHECK_LAUNCH("addToKernel");
}

} // namespace cuda
} // namespace mpc
