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
#pragma once

#include "runtime/backend.h"
#include "runtime/cuda/cuda_device.h"

#include <cstdint>
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

  /// Host input i (throws naming `what` if the node omits it).
  const Tensor &in(size_t i, const char *what) const;
  /// Host input i, or nullptr when omitted.
  const Tensor *optionalIn(size_t i) const;

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

  /// Device scratch of `bytes` (released with the staging).
  void *scratch(size_t bytes);
  /// A device copy of a small host table (labels, kernel descriptors).
  template <typename T> T *upload(const std::vector<T> &v) {
    return static_cast<T *>(uploadBytes(v.data(), v.size() * sizeof(T)));
  }

  /// Copies every output back to its host tensor and waits for the device.
  void finish();

private:
  void *allocate(size_t bytes);
  void *uploadBytes(const void *p, size_t bytes);

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
};

} // namespace cuda
} // namespace mpc
