// mpc-gpu-optimizer: bytes/s of the CUDA backend's loss-scale unscale and
// fused Adam update, against a device-to-device copy on the same GPU.
//
// The tensors are the parameters of the GPU step benchmark's model (a
// transformer stack: by default 12 blocks, d 768, hidden 3072, seq 512,
// vocab 8192; about 92 M parameters in 200 tensors), so the launch count
// per step is the real one. One timed iteration is what the compiled step
// runs at its end: the multi-tensor unscale of the fp16 gradients into fp32
// (found-inf on the device), then one Adam launch per parameter tensor that
// reads the flag. Bytes per element: fp16 gradient read (2) + fp32 gradient
// written (4) + Adam's p, g, m, v read (16) and p, m, v written (12) = 34.
// The copy moves the same number of bytes (read + write counted) with one
// cudaMemcpyAsync. Three warm-up iterations, then the median of 20 timed
// with CUDA events. Prints one line per measurement and a ratio; every CUDA
// status is checked and a failure exits 1 naming the call. Used by
// tools/gpu-check.sh (through bench/gpu_step.sh).
//
// Usage: mpc-gpu-optimizer [--layers=L --d=D --hidden=H --seq=T --vocab=V]
#include "kernels/cuda/optimizer.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "mpc-gpu-optimizer: %s failed: %s\n", what,
                 cudaGetErrorString(e));
    std::exit(1);
  }
}

/// Small finite values (never zeros or denormals, which some units skip).
__global__ void fillHalf(__half *p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    p[i] = __float2half(float(h >> 8) * (1.0f / 16777216.0f) - 0.5f);
  }
}

__global__ void fillFloat(float *p, int64_t n, float v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

/// The parameter tensor sizes of bench/make_transformer_stack.py's model.
std::vector<int64_t> stackParameterSizes(int64_t layers, int64_t d,
                                         int64_t hidden, int64_t seq,
                                         int64_t vocab) {
  std::vector<int64_t> sizes = {vocab * d, seq * d};
  for (int64_t l = 0; l < layers; ++l) {
    for (int i = 0; i < 2; ++i) // ln1, ln2: weight and bias
      sizes.insert(sizes.end(), {d, d});
    for (int i = 0; i < 4; ++i) // q, k, v, o
      sizes.insert(sizes.end(), {d * d, d});
    sizes.insert(sizes.end(), {hidden * d, hidden, d * hidden, d});
  }
  sizes.insert(sizes.end(), {d, d, vocab * d, vocab}); // lnf, head
  return sizes;
}

int64_t flag(int argc, char **argv, const char *name, int64_t fallback) {
  std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      char *end = nullptr;
      long long v = std::strtoll(argv[i] + prefix.size(), &end, 10);
      if (*end || v <= 0) {
        std::fprintf(stderr, "mpc-gpu-optimizer: %s wants a positive integer\n",
                     argv[i]);
        std::exit(1);
      }
      return v;
    }
  return fallback;
}

template <typename F> float medianMs(cudaStream_t stream, F &&iteration) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i)
    iteration();
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    iteration();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  check(cudaGetLastError(), "a kernel launch");
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return (ms[9] + ms[10]) / 2;
}

} // namespace

int main(int argc, char **argv) {
  using namespace mpc;
  std::vector<int64_t> sizes = stackParameterSizes(
      flag(argc, argv, "layers", 12), flag(argc, argv, "d", 768),
      flag(argc, argv, "hidden", 3072), flag(argc, argv, "seq", 512),
      flag(argc, argv, "vocab", 8192));
  int64_t total = 0;
  for (int64_t n : sizes)
    total += n;

  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
        "cudaStreamCreate");
  // One allocation per role; tensor i at the same offset in each.
  __half *grad16 = nullptr;
  float *grad32 = nullptr, *p = nullptr, *m = nullptr, *v = nullptr,
        *scale = nullptr;
  uint8_t *foundInf = nullptr;
  check(cudaMalloc(&grad16, total * sizeof(__half)), "cudaMalloc");
  for (float **buf : {&grad32, &p, &m, &v})
    check(cudaMalloc(buf, total * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&scale, sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&foundInf, 1), "cudaMalloc");
  fillHalf<<<1024, 256, 0, stream>>>(grad16, total, 7);
  fillFloat<<<1024, 256, 0, stream>>>(p, total, 0.25f);
  fillFloat<<<1024, 256, 0, stream>>>(m, total, 0.0f);
  fillFloat<<<1024, 256, 0, stream>>>(v, total, 0.0f);
  fillFloat<<<1, 1, 0, stream>>>(scale, 1, 65536.0f);
  check(cudaMemsetAsync(foundInf, 0, 1, stream), "cudaMemsetAsync");

  std::vector<cuda::UnscaleTensor> tensors;
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (int64_t n : sizes) {
    tensors.push_back({grad16 + offset, grad32 + offset, n, DType::F16});
    offsets.push_back(offset);
    offset += n;
  }
  std::vector<cuda::UnscaleChunk> chunks = cuda::unscaleChunks(tensors);
  cuda::UnscaleTensor *dTensors = nullptr;
  cuda::UnscaleChunk *dChunks = nullptr;
  check(cudaMalloc(&dTensors, tensors.size() * sizeof(tensors[0])),
        "cudaMalloc");
  check(cudaMalloc(&dChunks, chunks.size() * sizeof(chunks[0])), "cudaMalloc");
  check(cudaMemcpy(dTensors, tensors.data(),
                   tensors.size() * sizeof(tensors[0]), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(dChunks, chunks.data(), chunks.size() * sizeof(chunks[0]),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy");
  AdamScalars adam = adamScalars(1e-4, 0.9, 0.999, 1e-8, 0.0, false, 10);

  float updateMs = medianMs(stream, [&] {
    cuda::launchUnscaleGradients(scale, dTensors, dChunks,
                                 int64_t(chunks.size()), foundInf, stream);
    for (size_t i = 0; i < sizes.size(); ++i) {
      int64_t o = offsets[i];
      cuda::launchAdam(foundInf, p + o, grad32 + o, m + o, v + o, p + o, m + o,
                       v + o, sizes[i], adam, stream);
    }
  });
  double updateBytes = 34.0 * double(total);

  // The copy: the same bytes (read + write) as one device-to-device copy.
  size_t copyBytes = size_t(updateBytes / 2);
  void *src = nullptr, *dst = nullptr;
  check(cudaMalloc(&src, copyBytes), "cudaMalloc");
  check(cudaMalloc(&dst, copyBytes), "cudaMalloc");
  check(cudaMemsetAsync(src, 1, copyBytes, stream), "cudaMemsetAsync");
  float copyMs = medianMs(stream, [&] {
    check(
        cudaMemcpyAsync(dst, src, copyBytes, cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync");
  });

  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  double updateGBs = updateBytes / (updateMs * 1e-3) / 1e9;
  double copyGBs = 2.0 * double(copyBytes) / (copyMs * 1e-3) / 1e9;
  std::printf("gpu %s\n", prop.name);
  std::printf(
      "optimizer unscale+adam: %lld params in %zu tensors (%zu launches), "
      "%.3f ms, %.0f GB/s (34 B/param)\n",
      (long long)total, sizes.size(), sizes.size() + 1, updateMs, updateGBs);
  std::printf(
      "optimizer device copy: %.1f MB, %.3f ms, %.0f GB/s (read + write)\n",
      copyBytes / 1e6, copyMs, copyGBs);
  std::printf("optimizer unscale+adam vs copy: %.2f of the copy's bytes/s\n",
              updateGBs / copyGBs);
  return 0;
}
