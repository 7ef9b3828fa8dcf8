// The CUDA kernel of ONNX's Adagrad, Momentum and Adam: the shared MPC_HD
// step and update of kernels/common/preview_optimizer_math.h, one thread
// per element, the step's scalars made once per block from the device R
// and T.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/preview_training.h"

namespace mpc {
namespace cuda {
namespace {

template <typename C>
__global__ void previewKernel(PreviewHyper h, const void *r, bool r64,
                              const int64_t *step, PreviewTensor p) {
  // One thread per block computes the scalars (Adam: two pow in double).
  __shared__ double rate, beta;
  if (threadIdx.x == 0) {
    double rv = r64 ? *static_cast<const double *>(r)
                    : double(*static_cast<const float *>(r));
    PreviewStep s = previewStep(h, rv, *step);
    rate = s.rate;
    beta = s.beta;
  }
  __syncthreads();
  PreviewStep s;
  s.rate = rate;
  s.beta = beta;
  int groups = previewInputRuns(h.kind), outs = previewOutputRuns(h.kind);
  for (int64_t i = globalIndex(); i < p.n; i += globalStride()) {
    C in[4] = {}, out[3] = {};
    for (int g = 0; g < groups; ++g)
      in[g] = static_cast<const C *>(p.in[g])[i];
    previewUpdate<C>(h, s, in, out);
    for (int g = 0; g < outs; ++g)
      if (p.out[g])
        static_cast<C *>(p.out[g])[i] = out[g];
  }
}

} // namespace

void launchPreviewOptimizer(const PreviewHyper &h, DType t, const void *r,
                            DType rType, const int64_t *step,
                            const PreviewTensor &tensor, cudaStream_t s) {
  if (tensor.n == 0)
    return;
  if (rType != DType::F32 && rType != DType::F64)
    throw Error(std::string("preview optimizer: R must be fp32 or fp64, got ") +
                dtypeName(rType));
  bool r64 = rType == DType::F64;
  unsigned grid = gridFor(tensor.n);
  switch (t) {
  case DType::F32:
    previewKernel<float><<<grid, kBlock, 0, s>>>(h, r, r64, step, tensor);
    break;
  case DType::F64:
    previewKernel<double><<<grid, kBlock, 0, s>>>(h, r, r64, step, tensor);
    break;
  default:
    throw Error(std::string("preview optimizer: the cuda kernel takes fp32 or "
                            "fp64 tensors, got ") +
                dtypeName(t));
  }
  MPC_CUDA_CHECK_LAUNCH("previewKernel");
}

} // namespace cuda
} // namespace mpc
