// NodeStaging: uploads, output buffers, scratch, the copy back.
#include "runtime/cuda/node_staging.h"

#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cuda_check.h"

namespace mpc {
namespace cuda {

NodeStaging::NodeStaging(KernelContext &ctx, CudaDevice &device)
    : ctx_(ctx), device_(device), inputs_(ctx.inputs.size(), nullptr),
      uploaded_(ctx.inputs.size(), false) {}

NodeStaging::~NodeStaging() {
  for (void *p : buffers_)
    device_.allocator->release(p);
}

const Tensor &NodeStaging::in(size_t i, const char *what) const {
  return cpu::input(ctx_, i, what);
}

const Tensor *NodeStaging::optionalIn(size_t i) const {
  return cpu::optionalInput(ctx_, i);
}

void *NodeStaging::allocate(size_t bytes) {
  void *p = device_.allocator->allocate(bytes);
  buffers_.push_back(p);
  return p;
}

void *NodeStaging::uploadBytes(const void *p, size_t bytes) {
  if (bytes == 0)
    return nullptr;
  void *d = allocate(bytes);
  MPC_CUDA_CHECK(
      cudaMemcpyAsync(d, p, bytes, cudaMemcpyHostToDevice, device_.stream));
  return d;
}

const void *NodeStaging::device(size_t i) {
  const Tensor &t = in(i, "input");
  if (!uploaded_.at(i)) {
    inputs_[i] = uploadBytes(t.bytes.data(), t.byteSize());
    uploaded_[i] = true;
  }
  return inputs_[i];
}

const float *NodeStaging::deviceF32(size_t i) {
  const Tensor &t = in(i, "input");
  if (t.dtype == DType::F32)
    return static_cast<const float *>(device(i));
  if (!castSupported(t.dtype, DType::F32))
    cpu::fail(ctx_.node, "input ", i,
              " must be fp32, fp16 or bf16 on the "
              "cuda backend, got ",
              dtypeName(t.dtype));
  int64_t n = t.numel();
  if (n == 0)
    return nullptr;
  auto *f = static_cast<float *>(allocate(size_t(n) * sizeof(float)));
  launchCast(t.dtype, DType::F32, device(i), f, n, device_.stream);
  return f;
}

void *NodeStaging::out(size_t i, DType t, const std::vector<int64_t> &dims) {
  Tensor &host = cpu::output(ctx_, i, t, dims);
  size_t bytes = host.byteSize();
  void *d = nullptr;
  if (bytes > 0) {
    d = allocate(bytes);
    if (device_.options.poisonOutputs)
      MPC_CUDA_CHECK(cudaMemsetAsync(d, 0xff, bytes, device_.stream));
  }
  outputs_.push_back({&host, d, bytes});
  return d;
}

void *NodeStaging::optionalOut(size_t i, DType t,
                               const std::vector<int64_t> &dims) {
  return ctx_.hasOutput(i) ? out(i, t, dims) : nullptr;
}

void *NodeStaging::scratch(size_t bytes) {
  return bytes ? allocate(bytes) : nullptr;
}

void NodeStaging::finish() {
  // An output planned in place over an input shares that input's host
  // bytes, which out() leaves as they are; every upload has read them by
  // now (stream order), so copying back over them is safe.
  for (const Output &o : outputs_)
    if (o.bytes)
      MPC_CUDA_CHECK(cudaMemcpyAsync(o.host->bytes.data(), o.device, o.bytes,
                                     cudaMemcpyDeviceToHost, device_.stream));
  MPC_CUDA_CHECK(cudaStreamSynchronize(device_.stream));
}

} // namespace cuda
} // namespace mpc
