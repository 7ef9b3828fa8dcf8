// CudaDevice: what one CUDA backend holds on its GPU.
//
// One stream orders all of the backend's work (so buffers recycled by the
// allocator are never in use by earlier work), one cuBLAS handle and one
// cuDNN handle bound to that stream, and the caching allocator. The cuDNN
// handle is made on first use: cudnnCreate loads cuDNN's sub-libraries
// (hundreds of megabytes), which a step without convolutions or batch norm
// never needs, and a machine without them can still run such steps.
#pragma once

#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/device_allocator.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

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

  /// The cuDNN handle bound to `stream`, created on the first call; throws
  /// mpc::Error with cuDNN's reason when it cannot be created.
  cudnnHandle_t cudnnHandle();

private:
  cudnnHandle_t cudnn_ = nullptr;
};

/// Throws mpc::Error naming the cuBLAS call when status is not success.
void checkCublas(cublasStatus_t status, const char *what);

/// The live CudaDevice whose stream is `stream`. A runner sees only its
/// node's NodeStaging, which hands out the stream and the cuBLAS handle;
/// the cuDNN runners reach their device's cuDNN handle through this.
/// Throws when no device owns the stream (a bug).
CudaDevice &deviceForStream(cudaStream_t stream);

} // namespace cuda
} // namespace mpc
