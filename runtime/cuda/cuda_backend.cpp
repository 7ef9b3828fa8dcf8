// The CUDA backend: device discovery, the per-node staging loop, and the
// dispatch through the op table (cuda_ops.h).
//
// createCudaBackend() refuses, with the reason, when the runtime finds no
// driver or no device, or the GPU is older than sm_80 (the oldest target of
// the build, and the first with bf16 Tensor Cores). run() looks the node up
// in the table: shape/view ops run on the host with the CPU kernel, every
// other op is staged (node_staging.h) and launched on the backend's stream.
#include "runtime/cuda/cuda_backend.h"

#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

namespace mpc {
namespace cuda {

void checkCublas(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS error: ") + what +
                " failed: " + cublasGetStatusName(status) + " (" +
                cublasGetStatusString(status) + ")");
}

namespace {

void *rawDeviceAlloc(size_t bytes, void *) {
  void *p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky-free error state of a failed malloc
    return nullptr;
  }
  return p;
}

void rawDeviceFree(void *p, void *) { cudaFree(p); }

/// The live devices by stream (deviceForStream).
std::mutex &registryMutex() {
  static std::mutex m;
  return m;
}
std::map<cudaStream_t, CudaDevice *> &registry() {
  static std::map<cudaStream_t, CudaDevice *> r;
  return r;
}

} // namespace

CudaDevice &deviceForStream(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto it = registry().find(stream);
  if (it == registry().end())
    throw Error("internal error: no cuda device owns this stream");
  return *it->second;
}

cudnnHandle_t CudaDevice::cudnnHandle() {
  if (cudnn_)
    return cudnn_;
  MPC_CUDA_CHECK(cudaSetDevice(options.device));
  cudnnHandle_t h = nullptr;
  cudnnStatus_t st = cudnnCreate(&h);
  if (st != CUDNN_STATUS_SUCCESS)
    throw Error(std::string("cuDNN error: cudnnCreate failed: ") +
                cudnnGetErrorString(st) +
                " (the cuda backend needs cuDNN 9 for convolutions and "
                "batch norm)");
  st = cudnnSetStream(h, stream);
  if (st != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(h);
    throw Error(std::string("cuDNN error: cudnnSetStream failed: ") +
                cudnnGetErrorString(st));
  }
  cudnn_ = h;
  return cudnn_;
}

CudaDevice::CudaDevice(const CudaBackendOptions &opts) : options(opts) {
  MPC_CUDA_CHECK(cudaSetDevice(opts.device));
  MPC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  checkCublas(cublasCreate(&cublas), "cublasCreate");
  checkCublas(cublasSetStream(cublas, stream), "cublasSetStream");
  // fp32 accumulation all the way: no fp16 split-K reductions, no TF32.
  checkCublas(
      cublasSetMathMode(
          cublas,
          cublasMath_t(CUBLAS_DEFAULT_MATH |
                       CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
      "cublasSetMathMode");
  allocator =
      std::make_unique<DeviceAllocator>(rawDeviceAlloc, rawDeviceFree, nullptr);
  std::lock_guard<std::mutex> lock(registryMutex());
  registry()[stream] = this;
}

CudaDevice::~CudaDevice() {
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    registry().erase(stream);
  }
  if (stream)
    cudaStreamSynchronize(stream);
  allocator.reset();
  if (cudnn_)
    cudnnDestroy(cudnn_);
  if (cublas)
    cublasDestroy(cublas);
  if (stream)
    cudaStreamDestroy(stream);
}

namespace {

/// The CPU backend's input check: byte sizes match dtype and dims.
void checkInputs(const KernelContext &ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor *t = ctx.inputs[i];
    if (!t)
      continue;
    int64_t n = t->numel();
    if (n < 0 || t->dtype == DType::Undefined ||
        t->bytes.size() != size_t(n) * dtypeSize(t->dtype))
      cpu::fail(ctx.node, "input ", i, " is malformed (", dtypeName(t->dtype),
                " ", cpu::shapeString(t->dims), " with ", t->bytes.size(),
                " bytes)");
  }
}

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const CudaBackendOptions &options) : device_(options) {}

  std::string name() const override { return "cuda"; }

  bool supports(const Node &node, std::string &why) const override {
    return cudaBackendSupports(node, why);
  }

  void run(KernelContext &ctx) override {
    const CudaOpEntry *op = findCudaOp(ctx.node.domain(), ctx.node.opType());
    if (!op)
      cpu::fail(ctx.node, "the cuda backend has no kernel for op ",
                cudaOpName(ctx.node));
    checkInputs(ctx);
    if (!op->run) {
      const CpuKernel *k = findCpuKernel(ctx.node.domain(), ctx.node.opType());
      if (!k)
        cpu::fail(ctx.node, "no host kernel for op ", cudaOpName(ctx.node));
      (*k)(ctx);
      return;
    }
    NodeStaging staging(ctx, device_);
    op->run(staging);
    staging.finish();
  }

  /// cudaMemGetInfo on this backend's device (false if the query fails).
  bool deviceMemory(size_t &freeBytes, size_t &totalBytes) const override {
    if (cudaSetDevice(device_.options.device) != cudaSuccess ||
        cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return true;
  }

  CudaMemoryStats memoryStats() const {
    const DeviceAllocator::Stats &s = device_.allocator->stats();
    return {s.rawAllocations, s.cacheHits, s.peakReservedBytes};
  }

private:
  CudaDevice device_;
};

/// Why the runtime cannot use device `ordinal`, or "".
std::string deviceProblem(int ordinal) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    int driver = 0;
    cudaDriverGetVersion(&driver);
    cudaGetLastError();
    std::string status =
        std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    if (driver == 0)
      return "no CUDA driver found (" + status + ")";
    if (e == cudaErrorNoDevice)
      return "no CUDA device found (" + status + ")";
    return "the CUDA runtime cannot use the driver (" + status + ")";
  }
  if (count == 0)
    return "no CUDA device found";
  if (ordinal < 0 || ordinal >= count)
    return "device " + std::to_string(ordinal) + " does not exist (" +
           std::to_string(count) + " found)";
  cudaDeviceProp prop;
  e = cudaGetDeviceProperties(&prop, ordinal);
  if (e != cudaSuccess)
    return std::string("cannot query device: ") + cudaGetErrorString(e);
  if (prop.major < 8)
    return std::string(prop.name) + " has compute capability " +
           std::to_string(prop.major) + "." + std::to_string(prop.minor) +
           "; the cuda backend needs 8.0 or newer";
  return "";
}

} // namespace
} // namespace cuda

std::unique_ptr<Backend> createCudaBackend(std::string &whyNot,
                                           const CudaBackendOptions &options) {
  whyNot = cuda::deviceProblem(options.device);
  if (!whyNot.empty())
    return nullptr;
  try {
    return std::make_unique<cuda::CudaBackend>(options);
  } catch (const Error &e) {
    whyNot = e.what();
    return nullptr;
  }
}

CudaMemoryStats cudaMemoryStats(const Backend &backend) {
  if (const auto *b = dynamic_cast<const cuda::CudaBackend *>(&backend))
    return b->memoryStats();
  return {};
}

} // namespace mpc
