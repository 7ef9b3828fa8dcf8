// CUDA LeakyRelu kernels: LeakyRelu is a map, its gradient a zip of dY and X
// (the 16-byte vector loops of vector_access.cuh, float_map_launch.cuh),
// on fp32, fp16 and bf16 computed in fp32.
#include "kernels/common/piecewise_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/float_map_launch.cuh"
#include "kernels/cuda/leaky_relu.h"

namespace mpc {
namespace cuda {
namespace {

struct LeakyReluOp {
  float alpha;
  __device__ float operator()(float v) const {
    return leakyReluValue(v, alpha);
  }
};

struct LeakyReluGradOp {
  float alpha;
  __device__ float operator()(float g, float x) const {
    return leakyReluGradValue(g, x, alpha);
  }
};

} // namespace

void launchLeakyRelu(DType t, const void *x, void *y, int64_t n, float alpha,
                     cudaStream_t s) {
  map(t, x, y, n, s, "LeakyRelu", LeakyReluOp{alpha});
}

void launchLeakyReluGrad(DType gradT, const void *dy, DType fwdT, const void *x,
                         void *dx, int64_t n, float alpha, cudaStream_t s) {
  gradZip(gradT, dy, fwdT, x, dx, n, s, "LeakyReluGrad",
          LeakyReluGradOp{alpha});
}

} // namespace cuda
} // namespace mpc
