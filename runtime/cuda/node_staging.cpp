// NodeStaging: uploads, output buffers, scratch, the copy back; and the same
// calls on the arena of a device-resident step (see node_staging.h).
#include "runtime/cuda/node_staging.h"

#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cuda_check.h"

#include <cstring>

namespace mpc {
namespace cuda {

NodeStaging::NodeStaging(KernelContext &ctx, CudaDevice &device)
    : ctx_(ctx), device_(device), inputs_(ctx.inputs.size(), nullptr),
      uploaded_(ctx.inputs.size(), false) {
  if (ctx.resident)
    memo_ = &device.memo[&ctx.node];
}

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

bool NodeStaging::hasHostValue(size_t i) const {
  if (!ctx_.hasInput(i))
    return false;
  return !ctx_.resident || (i < ctx_.hostKnown.size() && ctx_.hostKnown[i]);
}

const Tensor &NodeStaging::hostValue(size_t i, const char *what) const {
  const Tensor &t = in(i, what);
  if (!hasHostValue(i))
    cpu::fail(ctx_.node, what, " (input ", i,
              ") is computed on the device during the step, and this op "
              "needs its value on the host; the device-resident step cannot "
              "run it (mpc-run --cuda-resident=off runs it staged)");
  return t;
}

const uint64_t *NodeStaging::deviceSeed() {
  if (ctx_.resident)
    return device_.seedDevice;
  return upload(std::vector<uint64_t>{ctx_.seed});
}

int32_t *NodeStaging::errorWord() const {
  return ctx_.resident ? device_.errorDevice : nullptr;
}

int32_t NodeStaging::errorCode() {
  if (!memo_)
    return 0;
  // Once per node (replays keep the codes); again if the memo's node is
  // gone and another node now has its address.
  std::string where = describeNode(ctx_.node);
  if (memo_->errorCode == 0 ||
      device_.errorNodes[size_t(memo_->errorCode) - 1] != where) {
    device_.errorNodes.push_back(std::move(where));
    memo_->errorCode = int32_t(device_.errorNodes.size());
  }
  return memo_->errorCode;
}

void *NodeStaging::allocate(size_t bytes) {
  if (device_.capturing)
    cpu::fail(ctx_.node,
              "internal error: a device allocation while the step is "
              "being captured into a CUDA graph");
  void *p = device_.allocator->allocate(bytes);
  buffers_.push_back(p);
  return p;
}

CudaDevice::Block &
NodeStaging::memoBlock(std::vector<CudaDevice::Block> &blocks, size_t &used,
                       size_t bytes) {
  if (used == blocks.size())
    blocks.emplace_back();
  CudaDevice::Block &b = blocks[used++];
  if (b.capacity < bytes) {
    // Only the first step of a shape allocates; a capture never does
    // (it follows a step of the same shapes).
    if (device_.capturing)
      cpu::fail(ctx_.node, "internal error: scratch grew from ", b.capacity,
                " to ", bytes, " bytes while the step is being captured");
    if (b.device)
      device_.allocator->release(b.device);
    b.device = device_.allocator->allocate(bytes);
    b.capacity = bytes;
    b.host.clear();
  }
  return b;
}

void *NodeStaging::uploadBytes(const void *p, size_t bytes) {
  if (bytes == 0)
    return nullptr;
  if (memo_) {
    // A table computed from the plan's shapes and addresses is the same on
    // every step: upload it once, and again only if it changed (never
    // while capturing: a graph must hold the bytes every replay reads).
    CudaDevice::Block &b = memoBlock(memo_->tables, tablesUsed_, bytes);
    if (b.host.size() == bytes && std::memcmp(b.host.data(), p, bytes) == 0)
      return b.device;
    if (device_.capturing)
      cpu::fail(ctx_.node,
                "a device table changed between two steps of the same "
                "shapes; the step cannot be captured as a CUDA graph "
                "(mpc-run --cuda-graphs=off)");
    b.host.assign(static_cast<const uint8_t *>(p),
                  static_cast<const uint8_t *>(p) + bytes);
    // From the memo's own copy: pageable, so the call returns once the
    // bytes are staged, and the runner's vector may go.
    MPC_CUDA_CHECK(cudaMemcpyAsync(b.device, b.host.data(), bytes,
                                   cudaMemcpyHostToDevice, device_.stream));
    return b.device;
  }
  void *d = allocate(bytes);
  MPC_CUDA_CHECK(
      cudaMemcpyAsync(d, p, bytes, cudaMemcpyHostToDevice, device_.stream));
  return d;
}

const void *NodeStaging::device(size_t i) {
  const Tensor &t = in(i, "input");
  if (ctx_.resident)
    return t.numel() > 0 ? ctx_.deviceInputs.at(i) : nullptr;
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
  auto *f = static_cast<float *>(scratch(size_t(n) * sizeof(float)));
  launchCast(t.dtype, DType::F32, device(i), f, n, device_.stream);
  return f;
}

void *NodeStaging::out(size_t i, DType t, const std::vector<int64_t> &dims) {
  if (ctx_.resident) {
    // The executor bound the output to its planned place with the plan's
    // dtype and dims: the runner must agree on the dtype and the size (the
    // dims' form may differ, [] against [1]; the runner's is kept).
    if (!ctx_.hasOutput(i))
      cpu::fail(ctx_.node, "missing output ", i);
    Tensor &o = *ctx_.outputs[i];
    int64_t n = cpu::checkedCount(ctx_.node, dims);
    if (o.dtype != t || o.numel() != n)
      cpu::fail(ctx_.node, "output ", i, " is ", dtypeName(t), " ",
                cpu::shapeString(dims), " but the plan says ",
                dtypeName(o.dtype), " ", cpu::shapeString(o.dims));
    o.dims = dims;
    void *d = o.byteSize() ? o.bytes.data() : nullptr;
    if (d && device_.options.poisonOutputs &&
        !(i < ctx_.inPlace.size() && ctx_.inPlace[i]))
      MPC_CUDA_CHECK(cudaMemsetAsync(d, 0xff, o.byteSize(), device_.stream));
    return d;
  }
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
  if (!bytes)
    return nullptr;
  if (memo_ && device_.workspace.shared)
    return sharedScratch(bytes);
  if (memo_)
    return memoBlock(memo_->scratch, scratchUsed_, bytes).device;
  return allocate(bytes);
}

void *NodeStaging::sharedScratch(size_t bytes) {
  CudaDevice::Workspace &w = device_.workspace;
  size_t offset = cursor_.take(bytes);
  size_t need = cursor_.used();
  if (need > w.capacity) {
    // Only a plan's warm-up step grows it; a capture follows a step of the
    // same shapes, whose nodes all fitted.
    if (device_.capturing)
      cpu::fail(ctx_.node,
                "internal error: the shared scratch workspace grew "
                "from ",
                w.capacity, " to ", need,
                " bytes while the step is being captured");
    size_t capacity = grownWorkspaceCapacity(w.capacity, need);
    void *p = nullptr;
    if (cudaMalloc(&p, capacity) != cudaSuccess) {
      cudaGetLastError();
      cpu::fail(ctx_.node,
                "cuda: out of device memory growing the shared "
                "scratch workspace to ",
                capacity, " bytes");
    }
    // Pieces handed out from the old buffer (to this node too) stay valid
    // until the step ends: it is freed once the stream is idle.
    if (w.device)
      w.retired.push_back(w.device);
    w.device = p;
    w.capacity = capacity;
    ++w.generation;
    ++w.allocations;
  }
  return static_cast<uint8_t *>(w.device) + offset;
}

void NodeStaging::finish() {
  if (ctx_.resident)
    return; // the outputs are in the arena; the step synchronises once
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
