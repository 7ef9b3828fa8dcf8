// mpc-gpu-gemm: cuBLAS matrix-product throughput on the GPU, the ceiling
// the CUDA backend's Gemm/MatMul run against.
//
// For each size N in {4096, 8192} and each of fp16 and bf16 (fp32
// accumulation, CUBLAS_COMPUTE_32F, the backend's settings), multiplies
// random N x N matrices (never zeros: they run faster than real data),
// three warm-up products then 20 timed with CUDA events, and prints the
// median TFLOP/s (2 N^3 / time). Every CUDA and cuBLAS status is checked;
// any failure exits 1 with the call named. Used by tools/gpu-check.sh.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "mpc-gpu-gemm: %s failed: %s\n", what,
                 cudaGetErrorString(e));
    std::exit(1);
  }
}

void check(cublasStatus_t s, const char *what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "mpc-gpu-gemm: %s failed: %s\n", what,
                 cublasGetStatusString(s));
    std::exit(1);
  }
}

/// Uniform values in [-1, 1) from a counter hash, as 16-bit patterns of
/// fp16 (bf16: the top half of an fp32).
__global__ void fillRandom(uint16_t *p, int64_t n, uint32_t seed, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    float v = float(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    if (bf16) {
      p[i] = uint16_t(__float_as_uint(v) >> 16);
    } else {
      __half hv = __float2half_rn(v);
      p[i] = *reinterpret_cast<uint16_t *>(&hv);
    }
  }
}

double medianTflops(cublasHandle_t handle, int n, cudaDataType_t type) {
  size_t elems = size_t(n) * n;
  uint16_t *a, *b, *c;
  check(cudaMalloc(&a, elems * 2), "cudaMalloc");
  check(cudaMalloc(&b, elems * 2), "cudaMalloc");
  check(cudaMalloc(&c, elems * 2), "cudaMalloc");
  bool bf16 = type == CUDA_R_16BF;
  fillRandom<<<1024, 256>>>(a, int64_t(elems), 1u, bf16);
  fillRandom<<<1024, 256>>>(b, int64_t(elems), 2u, bf16);
  check(cudaGetLastError(), "fillRandom");
  float alpha = 1, beta = 0;
  auto gemm = [&] {
    check(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a,
                       type, n, b, type, n, &beta, c, type, n,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  };
  for (int i = 0; i < 3; ++i)
    gemm();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> tflops;
  for (int i = 0; i < 20; ++i) {
    check(cudaEventRecord(start), "cudaEventRecord");
    gemm();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    tflops.push_back(2.0 * double(n) * n * n / (double(ms) * 1e-3) / 1e12);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  std::sort(tflops.begin(), tflops.end());
  return tflops[tflops.size() / 2];
}

} // namespace

int main() {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) {
    std::fprintf(stderr, "mpc-gpu-gemm: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cublasHandle_t handle;
  check(cublasCreate(&handle), "cublasCreate");
  check(cublasSetMathMode(handle,
                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
        "cublasSetMathMode");
  std::printf("gpu: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount);
  for (int n : {4096, 8192})
    for (cudaDataType_t type : {CUDA_R_16F, CUDA_R_16BF})
      std::printf("gemm %-4s %5d^3  %7.1f TFLOP/s (median of 20)\n",
                  type == CUDA_R_16F ? "fp16" : "bf16", n,
                  medianTflops(handle, n, type));
  cublasDestroy(handle);
  return 0;
}
