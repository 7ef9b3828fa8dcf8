// CudaDevice: what one CUDA backend holds on its GPU.
//
// One stream orders all of the backend's work (so buffers recycled by the
// allocator are never in use by earlier work), one cuBLAS handle bound to
// that stream, and the caching allocator.
#pragma once

#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/device_allocator.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>

namespace mpc {
namespace cuda {

struct CudaDevice {
  CudaBackendOptions options;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  std::unique_ptr<DeviceAllocator> allocator;

  explicit CudaDevice(const CudaBackendOptions &opts);
  ~CudaDevice();
  CudaDevice(const CudaDevice &) = delete;
  CudaDevice &operator=(const CudaDevice &) = delete;
};

/// Throws mpc::Error naming the cuBLAS call when status is not success.
void checkCublas(cublasStatus_t status, const char *what);

} // namespace cuda
} // namespace mpc
