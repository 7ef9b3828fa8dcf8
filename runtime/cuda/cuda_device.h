// CudaDevice: what one CUDA backend holds on its GPU.
//
// One stream orders all of the backend's work (so buffers recycled by the
// allocator are never in use by earlier work), one cuBLAS handle and one
// cuDNN handle bound to that stream, a cuBLASLt handle (Gemm with its bias
// in the epilogue; the stream is passed per call) with the algorithms its
// heuristic chose per problem, and the caching allocator. The cuDNN
// handle is made on first use: cudnnCreate loads cuDNN's sub-libraries
// (hundreds of megabytes), which a step without convolutions or batch norm
// never needs, and a machine without them can still run such steps. For
// device-resident steps it also keeps what lives from step to step: the
// one scratch workspace all nodes share (runtime/cuda/workspace_plan.h) and
// each node's device tables (sized on the first step, reused after, so no
// step after the first allocates and a CUDA graph can hold their
// addresses), a fixed cuBLAS workspace (cuBLAS must not allocate while a
// graph is being captured), the step's seed and error word in device memory
// with pinned host twins, and the device's free memory before any of it
// (runtime/cuda/device_peak.h).
#pragma once

#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/device_allocator.h"
#include "runtime/cuda/device_peak.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace mpc {
namespace cuda {

struct CudaDevice {
  CudaBackendOptions options;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublasLt = nullptr;
  std::unique_ptr<DeviceAllocator> allocator;

  /// cuBLASLt's choice per Gemm problem (gemm_bias_epilogue.cpp's key:
  /// dtype, shapes, operand alignments); `found` false when its heuristic
  /// offered nothing and the runner takes the cuBLAS path instead. Asking
  /// once keeps the heuristic off the per-step path of staged steps.
  struct LtChoice {
    bool found = false;
    cublasLtMatmulAlgo_t algo{};
  };
  std::map<std::vector<int64_t>, LtChoice> ltChoices;

  /// The scratch workspace every node of a device-resident step shares
  /// (workspace_plan.h): grown, never shrunk, in a plan's warm-up step;
  /// `retired` holds the buffers it outgrew during a step, freed once the
  /// stream is idle (work queued on them may still run until then);
  /// `generation` counts the moves (a graph holding an older address must
  /// not be replayed). `shared` false (MPC_CUDA_SHARED_SCRATCH=0): every
  /// node keeps scratch blocks of its own in its memo instead.
  struct Workspace {
    bool shared = true;
    void *device = nullptr;
    size_t capacity = 0;
    std::vector<void *> retired;
    uint64_t generation = 0;
    size_t allocations = 0; ///< cudaMalloc calls for it so far
  } workspace;
  /// Frees the retired workspace buffers (call with the stream idle).
  void freeRetiredWorkspace();
  /// The device's real footprint (cudaMemGetInfo since the start; sampled
  /// when stats are read too, hence mutable).
  mutable MeasuredPeak measuredPeak;

  /// Per node of a device-resident step: scratch blocks (only without the
  /// shared workspace) and uploaded tables in the order the runner asks for
  /// them.
  struct Block {
    void *device = nullptr;
    size_t capacity = 0;
    std::vector<uint8_t> host; ///< tables: the bytes last uploaded
  };
  struct NodeMemo {
    std::vector<Block> scratch, tables;
    int32_t errorCode = 0; ///< its code in errorNodes, once it has one
  };
  std::unordered_map<const Node *, NodeMemo> memo;
  /// True while the stream is being captured into a CUDA graph: nothing
  /// may be allocated or uploaded from pageable memory then.
  bool capturing = false;
  /// Bytes of the cuBLAS workspace (cublasSetWorkspace), which cuBLASLt
  /// calls share (both run in order on the one stream).
  static constexpr size_t kCublasWorkspace = size_t(32) << 20;
  void *cublasWorkspace = nullptr;
  /// The step's seed on the device and its pinned host twin.
  uint64_t *seedDevice = nullptr, *seedHost = nullptr;
  /// The step's error word (0: fine, k: node k - 1 of errorNodes flagged
  /// bad data) and its pinned host twin.
  int32_t *errorDevice = nullptr, *errorHost = nullptr;
  std::vector<std::string> errorNodes;
  /// The data-parallel world's NCCL communicator (an ncclComm_t, made by the
  /// first multi-rank mpc.AllReduce; runtime/cuda/nccl_world.h), or null.
  void *nccl = nullptr;

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

/// cuBLAS's name for fp16 and bf16; fp32 for anything else (the runners
/// check dtypes before they ask).
cudaDataType_t cublasDataType(DType t);

} // namespace cuda
} // namespace mpc
