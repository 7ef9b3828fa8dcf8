// The GPU's fp16/bf16 conversions (kernels/cuda/half_convert.cuh) run over
// every fp16 pattern, a list of fp32 patterns, and all 2^32 fp32 patterns,
// for half_convert_test.cpp to compare with the software routine.
#include "half_convert_nvcc.h"

#include "kernels/cuda/half_convert.cuh"

#include <cuda_runtime.h>

namespace mpc {
namespace nvcc {
namespace {

__global__ void fromHalfKernel(uint32_t *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 65536)
    out[i] = __float_as_uint(cuda::fromHalfBits(uint16_t(i)));
}

__global__ void toHalfKernel(const uint32_t *in, uint16_t *h, uint16_t *b,
                             int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float f = __uint_as_float(in[i]);
  h[i] = cuda::toHalfBits(f);
  b[i] = cuda::toBf16Bits(f);
}

__global__ void sweepKernel(unsigned long long *counts, uint32_t *first) {
  uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  unsigned long long halfBad = 0, bf16Bad = 0;
  for (uint64_t p = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       p < (uint64_t(1) << 32); p += stride) {
    float f = __uint_as_float(uint32_t(p));
    if (cuda::toHalfBits(f) != floatToHalf(f)) {
      ++halfBad;
      atomicMin(&first[0], uint32_t(p));
    }
    if (cuda::toBf16Bits(f) != floatToBf16(f)) {
      ++bf16Bad;
      atomicMin(&first[1], uint32_t(p));
    }
  }
  if (halfBad)
    atomicAdd(&counts[0], halfBad);
  if (bf16Bad)
    atomicAdd(&counts[1], bf16Bad);
}

/// Records the first failing CUDA call's message in `why`.
bool ok(cudaError_t e, const char *what, std::string &why) {
  if (e == cudaSuccess)
    return true;
  why = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

bool haveGpu(std::string &why) {
  int n = 0;
  if (!ok(cudaGetDeviceCount(&n), "cudaGetDeviceCount", why))
    return false;
  if (n == 0) {
    why = "no CUDA device";
    return false;
  }
  return true;
}

} // namespace

bool runHalfConversions(const std::vector<uint32_t> &floats,
                        std::vector<uint32_t> &fromHalf,
                        std::vector<uint16_t> &toHalf,
                        std::vector<uint16_t> &toBf16, std::string &why) {
  if (!haveGpu(why))
    return false;
  int64_t n = int64_t(floats.size());
  uint32_t *dFrom = nullptr, *dIn = nullptr;
  uint16_t *dH = nullptr, *dB = nullptr;
  bool good =
      ok(cudaMalloc(&dFrom, 65536 * sizeof(uint32_t)), "cudaMalloc", why) &&
      ok(cudaMalloc(&dIn, (n + 1) * sizeof(uint32_t)), "cudaMalloc", why) &&
      ok(cudaMalloc(&dH, (n + 1) * sizeof(uint16_t)), "cudaMalloc", why) &&
      ok(cudaMalloc(&dB, (n + 1) * sizeof(uint16_t)), "cudaMalloc", why) &&
      ok(cudaMemcpy(dIn, floats.data(), n * sizeof(uint32_t),
                    cudaMemcpyHostToDevice),
         "cudaMemcpy", why);
  if (good) {
    fromHalfKernel<<<256, 256>>>(dFrom);
    if (n > 0)
      toHalfKernel<<<unsigned((n + 255) / 256), 256>>>(dIn, dH, dB, n);
    fromHalf.resize(65536);
    toHalf.resize(n);
    toBf16.resize(n);
    good = ok(cudaGetLastError(), "launch", why) &&
           ok(cudaMemcpy(fromHalf.data(), dFrom, 65536 * sizeof(uint32_t),
                         cudaMemcpyDeviceToHost),
              "cudaMemcpy", why) &&
           ok(cudaMemcpy(toHalf.data(), dH, n * sizeof(uint16_t),
                         cudaMemcpyDeviceToHost),
              "cudaMemcpy", why) &&
           ok(cudaMemcpy(toBf16.data(), dB, n * sizeof(uint16_t),
                         cudaMemcpyDeviceToHost),
              "cudaMemcpy", why);
  }
  cudaFree(dFrom);
  cudaFree(dIn);
  cudaFree(dH);
  cudaFree(dB);
  return good;
}

bool sweepAllFloats(SweepResult &r, std::string &why) {
  if (!haveGpu(why))
    return false;
  unsigned long long *dCounts = nullptr;
  uint32_t *dFirst = nullptr;
  unsigned long long counts[2] = {0, 0};
  uint32_t first[2] = {0xffffffffu, 0xffffffffu};
  bool good =
      ok(cudaMalloc(&dCounts, sizeof counts), "cudaMalloc", why) &&
      ok(cudaMalloc(&dFirst, sizeof first), "cudaMalloc", why) &&
      ok(cudaMemcpy(dCounts, counts, sizeof counts, cudaMemcpyHostToDevice),
         "cudaMemcpy", why) &&
      ok(cudaMemcpy(dFirst, first, sizeof first, cudaMemcpyHostToDevice),
         "cudaMemcpy", why);
  if (good) {
    sweepKernel<<<4096, 256>>>(dCounts, dFirst);
    good =
        ok(cudaGetLastError(), "launch", why) &&
        ok(cudaMemcpy(counts, dCounts, sizeof counts, cudaMemcpyDeviceToHost),
           "cudaMemcpy", why) &&
        ok(cudaMemcpy(first, dFirst, sizeof first, cudaMemcpyDeviceToHost),
           "cudaMemcpy", why);
  }
  cudaFree(dCounts);
  cudaFree(dFirst);
  r.halfMismatches = counts[0];
  r.bf16Mismatches = counts[1];
  r.firstHalf = first[0];
  r.firstBf16 = first[1];
  return good;
}

} // namespace nvcc
} // namespace mpc
