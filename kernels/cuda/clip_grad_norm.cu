// CUDA ClipGradNorm: chunked sums of squares, the norm in one block (the
// tensors' sums side by side, their norms added in order), the scale; see
// clip_grad_norm.h. Deterministic: no atomics, fixed orders.
#include "kernels/common/clip_grad_norm_math.h"
#include "kernels/cuda/clip_grad_norm.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/warp_reduce.cuh"

namespace mpc {
namespace cuda {
namespace {

__device__ int64_t chunkEnd(const UnscaleChunk &c, const ClipTensor &t) {
  return c.begin + kUnscaleChunk < t.n ? c.begin + kUnscaleChunk : t.n;
}

__global__ void squaresKernel(const ClipTensor *__restrict__ tensors,
                              const UnscaleChunk *__restrict__ chunks,
                              float *__restrict__ partials) {
  __shared__ float shared[kWarp];
  UnscaleChunk c = chunks[blockIdx.x];
  ClipTensor t = tensors[c.tensor];
  float sq = 0.0f;
  for (int64_t i = c.begin + threadIdx.x; i < chunkEnd(c, t); i += blockDim.x) {
    float v = loadAs(t.dtype, t.src, i);
    sq += v * v;
  }
  sq = blockSum(sq, shared);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = sq;
}

/// The total norm and the coefficient, one block: thread t sums tensor t's
/// chunk partials in chunk order (tensors side by side, blockDim.x a round),
/// then thread 0 adds the tensors' norms in tensor order. The order of every
/// addition is the one a single thread walking all of them used, so the bits
/// are those of that walk on every run, with the per-tensor work in parallel.
__global__ void __launch_bounds__(kBlock)
    normKernel(const float *__restrict__ partials,
               const int64_t *__restrict__ firstChunk, int32_t numTensors,
               float maxNorm, float *coef, float *totalNorm) {
  __shared__ float squares[kBlock];
  float sumOfNormSquares = 0.0f; // thread 0's
  for (int32_t round = 0; round < numTensors; round += int32_t(kBlock)) {
    int32_t t = round + int32_t(threadIdx.x);
    if (t < numTensors) {
      float sq = 0.0f;
      for (int64_t c = firstChunk[t]; c < firstChunk[t + 1]; ++c)
        sq += partials[c];
      squares[threadIdx.x] = sq;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int32_t inRound = numTensors - round < int32_t(kBlock)
                            ? numTensors - round
                            : int32_t(kBlock);
      for (int32_t i = 0; i < inRound; ++i)
        clipAddTensorNorm(sumOfNormSquares, squares[i]);
    }
    __syncthreads(); // squares is written again next round
  }
  if (threadIdx.x != 0)
    return;
  float total = sqrtOf(sumOfNormSquares);
  *totalNorm = total;
  *coef = clipGradNormCoefficient(total, maxNorm);
}

__global__ void clipKernel(const ClipTensor *__restrict__ tensors,
                           const UnscaleChunk *__restrict__ chunks,
                           const float *__restrict__ coef) {
  UnscaleChunk c = chunks[blockIdx.x];
  ClipTensor t = tensors[c.tensor];
  if (!t.dst)
    return;
  float k = *coef;
  for (int64_t i = c.begin + threadIdx.x; i < chunkEnd(c, t); i += blockDim.x)
    storeAs(t.dtype, t.dst, i, loadAs(t.dtype, t.src, i) * k);
}

} // namespace

ClipPlan clipPlan(const std::vector<ClipTensor> &tensors) {
  ClipPlan p;
  for (size_t t = 0; t < tensors.size(); ++t) {
    p.firstChunk.push_back(int64_t(p.chunks.size()));
    for (int64_t b = 0; b < tensors[t].n; b += kUnscaleChunk)
      p.chunks.push_back({int32_t(t), 0, b});
  }
  p.firstChunk.push_back(int64_t(p.chunks.size()));
  return p;
}

void launchClipGradNorm(const ClipLaunch &l, cudaStream_t s) {
  if (l.numChunks > int64_t(0x7fffffff))
    throw Error("ClipGradNorm: too many elements for one launch");
  float *coef = l.scratch + l.numChunks;
  unsigned chunks = unsigned(l.numChunks);
  if (chunks) {
    squaresKernel<<<chunks, kBlock, 0, s>>>(l.tensors, l.chunks, l.scratch);
    MPC_CUDA_CHECK_LAUNCH("squaresKernel");
  }
  normKernel<<<1, kBlock, 0, s>>>(l.scratch, l.firstChunk, l.numTensors,
                                  l.maxNorm, coef, l.totalNorm);
  MPC_CUDA_CHECK_LAUNCH("normKernel");
  if (chunks) {
    clipKernel<<<chunks, kBlock, 0, s>>>(l.tensors, l.chunks, coef);
    MPC_CUDA_CHECK_LAUNCH("clipKernel");
  }
}

} // namespace cuda
} // namespace mpc
