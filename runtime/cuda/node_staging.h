// NodeStaging: one node's device buffers in the staged CUDA backend.
//
// The executor hands the backend host tensors. NodeStaging copies an input
// to the device the first time a runner asks for it, allocates the host
// output (through the CPU helpers, so sizes are checked the same way) with
// a device buffer beside it, hands out scratch, and at finish() copies every
// output back and waits for the stream. All device memory comes from the
// backend's caching allocator and returns to it when the staging ends. This
// is the one place that knows tensors live on the host: the runners pass
// raw device pointers on to the kernels.
//
// In a device-resident step (KernelContext::resident) the same calls mean
// the same things without any copy: device(i) is the input's place in the
// executor's arena, out() checks the runner's dtype and size against the
// plan and returns the output's place, scratch() carves the node's
// requests front to back from the device-wide shared workspace
// (CudaDevice::workspace, runtime/cuda/workspace_plan.h), upload() hands
// out the node's tables kept in CudaDevice::memo (both allocated in the
// first step, the same addresses after, so a captured CUDA graph stays
// valid), and finish() neither copies nor waits. Runners keep one code path for
// both modes; the values they read on the host come from hostValue(), which in
// a resident step exists only for values the executor mirrors (constants,
// shapes).
#pragma once

#include "runtime/backend.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/workspace_plan.h"

#include <cstdint>
#include <type_traits>
#include <vector>

namespace mpc {
namespace cuda {

class NodeStaging {
public:
  NodeStaging(KernelContext &ctx, CudaDevice &device);
  ~NodeStaging();
  NodeStaging(const NodeStaging &) = delete;
  NodeStaging &operator=(const NodeStaging &) = delete;

  const Node &node() const { return ctx_.node; }
  KernelContext &ctx() { return ctx_; }
  cudaStream_t stream() const { return device_.stream; }
  cublasHandle_t cublas() const { return device_.cublas; }
  /// The device's cuBLASLt handle, its fixed workspace (shared with cuBLAS:
  /// both run in order on the one stream) and its Gemm plan cache.
  CudaDevice &cudaDevice() const { return device_; }
  /// The device's cuDNN handle, bound to stream() (created on first use).
  cudnnHandle_t cudnn() const { return device_.cudnnHandle(); }

  /// Host input i (throws naming `what` if the node omits it).
  const Tensor &in(size_t i, const char *what) const;
  /// Host input i, or nullptr when omitted.
  const Tensor *optionalIn(size_t i) const;

  /// True in a device-resident step.
  bool resident() const { return ctx_.resident; }
  /// Input i whose value the runner reads on the host: the input itself
  /// when staged, its host mirror in a resident step; throws naming the
  /// node when a resident step has no mirror (the value is data). Runners
  /// list such inputs in their op entry (CudaOpEntry::hostInputs) so the
  /// executor refuses the step before it starts.
  const Tensor &hostValue(size_t i, const char *what) const;
  /// Whether hostValue(i) would succeed.
  bool hasHostValue(size_t i) const;

  /// The step's seed on the device (resident) or a device copy of ctx.seed.
  const uint64_t *deviceSeed();
  /// Where kernels flag bad data (resident steps; nullptr when staged, where
  /// the runner checks on the host) and this node's code for it.
  int32_t *errorWord() const;
  int32_t errorCode();

  /// Device copy of input i (uploaded once; nullptr for an empty tensor).
  const void *device(size_t i);
  /// Device fp32 copy of input i, which must be fp32, fp16 or bf16.
  const float *deviceF32(size_t i);

  /// Allocates output i on the host and a device buffer for it (poisoned
  /// when the backend is asked to); nullptr for an empty tensor. Throws if
  /// the node omits the output.
  void *out(size_t i, DType t, const std::vector<int64_t> &dims);
  /// Like out() but nullptr when the node omits output i.
  void *optionalOut(size_t i, DType t, const std::vector<int64_t> &dims);

  /// Device scratch of `bytes` (released with the staging; in a resident
  /// step a piece of the shared workspace, which the next node reuses);
  /// nullptr for 0.
  void *scratch(size_t bytes);
  /// A device copy of a small host table (labels, kernel descriptors).
  template <typename T> T *upload(const std::vector<T> &v) {
    // A resident step uploads a table once and compares it byte for byte
    // on later steps: padding bytes (garbage) would make it "change" and
    // break the CUDA graph's capture, so tables spell out their padding.
    static_assert(std::has_unique_object_representations_v<T> ||
                      std::is_floating_point_v<T>,
                  "an uploaded table's type must have no padding bytes");
    return static_cast<T *>(uploadBytes(v.data(), v.size() * sizeof(T)));
  }

  /// Copies every output back to its host tensor and waits for the device.
  void finish();

private:
  void *allocate(size_t bytes);
  void *uploadBytes(const void *p, size_t bytes);
  /// The next piece of the shared workspace, grown to hold it.
  void *sharedScratch(size_t bytes);
  /// The node's next memo block of at least `bytes` (resident steps).
  CudaDevice::Block &memoBlock(std::vector<CudaDevice::Block> &blocks,
                               size_t &used, size_t bytes);

  KernelContext &ctx_;
  CudaDevice &device_;
  std::vector<void *> buffers_;
  std::vector<const void *> inputs_;
  std::vector<bool> uploaded_;
  struct Output {
    Tensor *host;
    void *device;
    size_t bytes;
  };
  std::vector<Output> outputs_;
  CudaDevice::NodeMemo *memo_ = nullptr;
  size_t scratchUsed_ = 0, tablesUsed_ = 0;
  ScratchCursor cursor_;
};

} // namespace cuda
} // namespace mpc
