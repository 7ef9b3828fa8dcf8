// The CUDA backend: device discovery, the per-node staging loop, and the
// dispatch through the op table (cuda_ops.h).
//
// createCudaBackend() refuses, with the reason, when the runtime finds no
// driver or no device, or the GPU is older than sm_80 (the oldest target of
// the build, and the first with bf16 Tensor Cores). run() looks the node up
// in the table: shape/view ops run on the host with the CPU kernel, every
// other op is staged (node_staging.h) and launched on the backend's stream.
//
// Device-resident steps (CudaBackendOptions::resident, the default for the
// executor): the executor's arena is one cudaMalloc per plan, runners work
// on it in place, shape/view ops become device copies with the plan's dims
// (or nothing, where the plan put the output over its input), and the step
// ends with one synchronisation that also brings back the error word
// kernels set on bad data. With graphs on, the second step of a plan runs
// under cudaStreamBeginCapture (global capture would forbid nothing we do;
// thread-local keeps other threads' CUDA calls legal), and later steps with
// the same plan only upload the batch and seed and launch the graph. The
// first step of a plan is never captured: it sizes every scratch block and
// lets cuBLAS pick its algorithms, so the capture allocates nothing.
#include "runtime/cuda/cuda_backend.h"

#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/graph_cache.h"
#include "runtime/cuda/nccl_world.h"
#include "runtime/cuda/node_staging.h"
#include "runtime/cuda/op_profile.h"
#include "runtime/cuda/pinned_buffer.h"
#include "runtime/cuda/step_tickets.h"
#include "runtime/executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace mpc {
namespace cuda {

void checkCublas(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS error: ") + what +
                " failed: " + cublasGetStatusName(status) + " (" +
                cublasGetStatusString(status) + ")");
}

cudaDataType_t cublasDataType(DType t) {
  switch (t) {
  case DType::F16:
    return CUDA_R_16F;
  case DType::BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
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

} // namespace

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
  // The context first (cudaFree(0) makes it), then the baseline of the
  // measured footprint, before anything of the backend's is allocated.
  MPC_CUDA_CHECK(cudaFree(nullptr));
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess)
    measuredPeak.start(freeBytes);
  else
    cudaGetLastError(); // not measured: the stats say 0
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
  checkCublas(cublasLtCreate(&cublasLt), "cublasLtCreate");
  allocator =
      std::make_unique<DeviceAllocator>(rawDeviceAlloc, rawDeviceFree, nullptr);
  // cuBLAS allocates its workspace lazily unless given one; inside a graph
  // capture it must not, so it gets a fixed one (32 MiB: what NVIDIA
  // recommends for Hopper).
  MPC_CUDA_CHECK(cudaMalloc(&cublasWorkspace, kCublasWorkspace));
  checkCublas(cublasSetWorkspace(cublas, cublasWorkspace, kCublasWorkspace),
              "cublasSetWorkspace");
  MPC_CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void **>(&seedDevice), sizeof(uint64_t)));
  MPC_CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void **>(&errorDevice), sizeof(int32_t)));
  MPC_CUDA_CHECK(
      cudaMallocHost(reinterpret_cast<void **>(&seedHost), sizeof(uint64_t)));
  MPC_CUDA_CHECK(
      cudaMallocHost(reinterpret_cast<void **>(&errorHost), sizeof(int32_t)));
  *seedHost = 0;
  *errorHost = 0;
}

CudaDevice::~CudaDevice() {
  if (stream)
    cudaStreamSynchronize(stream);
  destroyNcclComm(*this);
  for (auto &kv : memo)
    for (auto *blocks : {&kv.second.scratch, &kv.second.tables})
      for (Block &b : *blocks)
        if (b.device)
          allocator->release(b.device);
  allocator.reset();
  freeRetiredWorkspace();
  if (workspace.device)
    cudaFree(workspace.device);
  if (cudnn_)
    cudnnDestroy(cudnn_);
  cudaFree(cublasWorkspace);
  cudaFree(seedDevice);
  cudaFree(errorDevice);
  cudaFreeHost(seedHost);
  cudaFreeHost(errorHost);
  if (cublasLt)
    cublasLtDestroy(cublasLt);
  if (cublas)
    cublasDestroy(cublas);
  if (stream)
    cudaStreamDestroy(stream);
}

void CudaDevice::freeRetiredWorkspace() {
  for (void *p : workspace.retired)
    cudaFree(p);
  workspace.retired.clear();
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

/// Shape and view ops in a device-resident step: their outputs are bound
/// with the plan's dims. Views copy the input's bytes (nothing to do where
/// the plan put the output over the input); Shape, Constant and
/// ConstantOfShape are computed on the host from dims and mirrored values
/// and copied from a device table uploaded once.
void runHostOpResident(KernelContext &ctx, CudaDevice &device,
                       const CpuKernel &kernel) {
  const std::string &op = ctx.node.opType();
  NodeStaging s(ctx, device);
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" ||
      op == "Unsqueeze" || op == "Identity") {
    const Tensor &x = s.in(0, "data");
    if (!ctx.hasOutput(0))
      cpu::fail(ctx.node, "missing output 0");
    Tensor &y = *ctx.outputs[0];
    if (x.dtype != y.dtype || x.numel() != y.numel())
      cpu::fail(ctx.node, "input ", dtypeName(x.dtype), " ",
                cpu::shapeString(x.dims), " does not become the plan's ",
                dtypeName(y.dtype), " ", cpu::shapeString(y.dims));
    const void *src = s.device(0);
    if (y.byteSize() && y.bytes.data() != src)
      MPC_CUDA_CHECK(cudaMemcpyAsync(y.bytes.data(), src, y.byteSize(),
                                     cudaMemcpyDeviceToDevice, s.stream()));
    return;
  }
  KernelContext host{ctx.node, ctx.inputs, {}, ctx.seed, {}};
  std::vector<Tensor> outs(ctx.outputs.size());
  for (size_t i = 0; i < outs.size(); ++i)
    host.outputs.push_back(ctx.outputs[i] ? &outs[i] : nullptr);
  kernel(host);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!ctx.outputs[i])
      continue;
    void *dst = s.out(i, outs[i].dtype, outs[i].dims);
    size_t bytes = outs[i].byteSize();
    if (!bytes)
      continue;
    const void *table = s.upload(std::vector<uint8_t>(
        outs[i].bytes.data(), outs[i].bytes.data() + bytes));
    MPC_CUDA_CHECK(cudaMemcpyAsync(dst, table, bytes, cudaMemcpyDeviceToDevice,
                                   s.stream()));
  }
}

/// An on/off switch from the environment: unset or empty is `dflt`, "0"
/// and "off" are off, anything else on (MPC_CUDA_GRAPHS, MPC_CUDA_PROFILE).
bool flagFromEnvironment(const char *name, bool dflt) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return dflt;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0);
}

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const CudaBackendOptions &options)
      : device_(withEnvironment(options)),
        graphs_(flagFromEnvironment("MPC_CUDA_GRAPHS", options.graphs) &&
                !flagFromEnvironment("MPC_CUDA_PROFILE", false)) {
    // Events between nodes cannot be in a graph: profiling turns graphs off.
    if (flagFromEnvironment("MPC_CUDA_PROFILE", false))
      profile_ = std::make_unique<OpProfile>();
    device_.workspace.shared =
        flagFromEnvironment("MPC_CUDA_SHARED_SCRATCH", true);
    for (StepSlot &slot : slots_) {
      MPC_CUDA_CHECK(
          cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
      MPC_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void **>(&slot.words),
                                    2 * sizeof(uint64_t)));
      slot.words[0] = slot.words[1] = 0;
    }
  }

  ~CudaBackend() override {
    if (profile_) {
      cudaStreamSynchronize(device_.stream);
      profile_->print(stderr);
    }
    cudaStreamSynchronize(device_.stream); // nothing in flight to or from
    destroyGraphs(graphs_.dropAll());      // the arenas or pinned memory
    for (const auto &kv : arenas_)
      cudaFree(kv.first);
    for (StepSlot &slot : slots_) {
      if (slot.done)
        cudaEventDestroy(slot.done);
      cudaFreeHost(slot.words);
    }
  }

  std::string name() const override { return "cuda"; }

  bool supports(const Node &node, std::string &why) const override {
    return cudaBackendSupports(node, why);
  }

  void run(KernelContext &ctx) override {
    if (device_.capturing) {
      // Kept, so that the step can run eagerly if the capture fails: the
      // contexts' tensors stay where they are until the step ends.
      recorded_.push_back({std::make_unique<KernelContext>(ctx)});
      try {
        runNode(ctx);
      } catch (const Error &e) {
        captureFailed(e.what()); // runs what was recorded, this node too
      }
      return;
    }
    // Profiles cover device-resident steps (their synchronize() reads the
    // events); a staged node synchronises on its own.
    if (!profile_ || !ctx.resident)
      return runNode(ctx);
    profile_->nodeBegins(device_.stream);
    runNode(ctx);
    profile_->nodeEnds(device_.stream, ctx.node);
  }

  void runNode(KernelContext &ctx) {
    const CudaOpEntry *op = findCudaOp(ctx.node.domain(), ctx.node.opType());
    if (!op)
      cpu::fail(ctx.node, "the cuda backend has no kernel for op ",
                cudaOpName(ctx.node));
    if (!ctx.resident)
      checkInputs(ctx);
    if (!op->run) {
      const CpuKernel *k = findCpuKernel(ctx.node.domain(), ctx.node.opType());
      if (!k)
        cpu::fail(ctx.node, "no host kernel for op ", cudaOpName(ctx.node));
      if (ctx.resident)
        runHostOpResident(ctx, device_, *k);
      else
        (*k)(ctx);
      return;
    }
    NodeStaging staging(ctx, device_);
    op->run(staging);
    staging.finish();
  }

  // --- device-resident steps

  bool deviceResident() const override { return device_.options.resident; }
  /// Resident steps end with an event, not a wait (submitStep), but for a
  /// profile, whose per-step table reads the events at each step's end.
  bool asyncSteps() const override {
    return device_.options.resident && !profile_;
  }

  bool supportsResident(const Node &node, const std::vector<bool> &hostKnown,
                        std::string &why) const override {
    return cuda::supportsResident(node, hostKnown, why);
  }

  uint8_t *allocateArena(size_t bytes) override {
    void *p = nullptr;
    // At least one byte, so that an empty plan still has an address.
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
      cudaGetLastError();
      throw Error("cuda: out of device memory allocating the step's arena "
                  "of " +
                  formatByteSize(bytes));
    }
    ++arenaAllocations_;
    // Zeroed once, so no kernel ever reads bytes nobody wrote.
    MPC_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, device_.stream));
    // One arena per executor (the trainer's, the evaluator's): all count.
    arenas_[static_cast<uint8_t *>(p)] = bytes;
    arenaTotal_ += bytes;
    peakArenaTotal_ = std::max(peakArenaTotal_, arenaTotal_);
    return static_cast<uint8_t *>(p);
  }

  void freeArena(uint8_t *arena) override {
    MPC_CUDA_CHECK(cudaStreamSynchronize(device_.stream));
    // Graphs hold arena addresses, and which plans used this arena is not
    // known here: every graph goes (the other plans capture again once).
    destroyGraphs(graphs_.dropAll());
    cudaFree(arena);
    auto it = arenas_.find(arena);
    if (it != arenas_.end()) {
      arenaTotal_ -= it->second;
      arenas_.erase(it);
    }
  }

  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return;
    // The batch (and state the host changed) through pinned memory: the
    // copy queues behind the previous step's work instead of waiting for
    // it, which a copy from pageable memory does.
    if (uint8_t *staged = slot().uploads.take(bytes)) {
      std::memcpy(staged, src, bytes);
      src = staged;
    }
    MPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                   device_.stream));
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return;
    // A copy into pageable memory returns only when it is done (a sync per
    // copy); the step's few scalars go through pinned memory instead and
    // reach `dst` in synchronize(), after the step's one wait.
    if (uint8_t *staged = slot().downloads.take(bytes)) {
      MPC_CUDA_CHECK(cudaMemcpyAsync(staged, src, bytes, cudaMemcpyDeviceToHost,
                                     device_.stream));
      slot().pending.push_back({dst, staged, bytes});
      return;
    }
    MPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
                                   device_.stream));
  }
  void copyOnDevice(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return;
    if (device_.capturing)
      recorded_.push_back({nullptr, dst, src, bytes});
    MPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                   device_.stream));
  }

  void synchronize() override {
    MPC_CUDA_CHECK(cudaStreamSynchronize(device_.stream));
    if (profile_)
      profile_->stepEnds();
    device_.freeRetiredWorkspace();
    if (MeasuredPeak::sampleAt(steps_))
      sampleDeviceMemory();
    // Every step in flight has arrived, oldest first, then what was
    // enqueued since the last submitStep.
    for (int i; (i = tickets_.oldestInFlight()) >= 0;)
      deliver(i);
    deliver(tickets_.current());
    throwFailure(UINT64_MAX);
  }

  uint64_t submitStep() override {
    if (!asyncSteps()) {
      synchronize();
      return 0;
    }
    // The step's end, as an event; its downloads and words stay in its
    // slot until waitStep. The next step takes the other slot, which must
    // have arrived first (two steps in flight at most).
    MPC_CUDA_CHECK(cudaEventRecord(slot().done, device_.stream));
    uint64_t ticket = tickets_.submit();
    // An error that step found is its own: waitStep(its ticket) says it.
    if (tickets_.inFlight(tickets_.current()))
      arrive(tickets_.ticket(tickets_.current()));
    return ticket;
  }

  void waitStep(uint64_t ticket) override {
    arrive(ticket);
    throwFailure(ticket);
  }

  /// Waits for the steps in flight up to `ticket` and delivers them.
  void arrive(uint64_t ticket) {
    for (int i; (i = tickets_.oldestInFlight(ticket)) >= 0;) {
      MPC_CUDA_CHECK(cudaEventSynchronize(slots_[i].done));
      deliver(i);
    }
    // A workspace a warm-up step outgrew is freed once nothing can use it:
    // no step in flight and the stream idle (a step run synchronously; a
    // run's last step).
    // (cudaErrorNotReady is a state, not an error: nothing to clear.)
    if (tickets_.oldestInFlight() < 0 &&
        cudaStreamQuery(device_.stream) == cudaSuccess)
      device_.freeRetiredWorkspace();
    if (MeasuredPeak::sampleAt(steps_))
      sampleDeviceMemory();
  }

  /// Throws the first error a delivered step up to `ticket` found (and
  /// forgets those steps' errors).
  void throwFailure(uint64_t ticket) {
    std::string error = tickets_.takeError(ticket);
    if (!error.empty())
      throw Error(error);
  }

  bool beginStep(const StepInfo &info) override {
    ++steps_;
    if (profile_)
      profile_->stepBegins();
    // The seed and a clean error word, before any recorded work: neither
    // copy is part of the graph, both are in stream order before it.
    // From this step's slot: the word of a step still in flight may not
    // have been read by its copy yet.
    slot().words[0] = info.seed;
    MPC_CUDA_CHECK(cudaMemcpyAsync(device_.seedDevice, &slot().words[0],
                                   sizeof(uint64_t), cudaMemcpyHostToDevice,
                                   device_.stream));
    MPC_CUDA_CHECK(cudaMemsetAsync(device_.errorDevice, 0, sizeof(int32_t),
                                   device_.stream));
    plan_ = info.planId;
    recorded_.clear();
    if (!graphs_.enabled())
      return false;
    // The workspace moved since the graphs were captured (a warm-up step
    // of another plan outgrew it): they hold its old address.
    if (device_.workspace.generation != workspaceSeen_) {
      MPC_CUDA_CHECK(cudaStreamSynchronize(device_.stream));
      destroyGraphs(graphs_.dropAll());
      workspaceSeen_ = device_.workspace.generation;
    }
    switch (graphs_.begin(plan_)) {
    case GraphCache::Action::Replay:
      replaying_ = true;
      return true;
    case GraphCache::Action::Capture: {
      cudaError_t e = cudaStreamBeginCapture(device_.stream,
                                             cudaStreamCaptureModeThreadLocal);
      if (e != cudaSuccess) {
        std::string what =
            std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
        cudaGetLastError();
        warnAndStopGraphs(what);
        return false;
      }
      device_.capturing = true;
      return false;
    }
    case GraphCache::Action::Eager:
      return false;
    }
    return false;
  }

  void endStep() override {
    if (device_.capturing) {
      device_.capturing = false;
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      cudaError_t e = cudaStreamEndCapture(device_.stream, &graph);
      if (e == cudaSuccess) {
        e = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
      }
      if (e == cudaSuccess && device_.options.failCaptures) {
        cudaGraphExecDestroy(exec);
        e = cudaErrorStreamCaptureUnsupported; // the tests' stand-in
      }
      if (e != cudaSuccess) {
        std::string what =
            std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
        cudaGetLastError();
        captureFailed(what, /*captureEnded=*/true);
      } else {
        recorded_.clear();
        destroyGraphs(graphs_.store(plan_, exec));
        ++graphCaptures_;
        replaying_ = true; // the capture ran nothing: launch it now
      }
    }
    if (replaying_) {
      replaying_ = false;
      auto exec = static_cast<cudaGraphExec_t>(graphs_.graph(plan_));
      if (!exec)
        throw Error("cuda: internal error: no CUDA graph to replay for the "
                    "step's plan");
      MPC_CUDA_CHECK(cudaGraphLaunch(exec, device_.stream));
      ++graphLaunches_;
    }
    MPC_CUDA_CHECK(cudaMemcpyAsync(errorWord(slot()), device_.errorDevice,
                                   sizeof(int32_t), cudaMemcpyDeviceToHost,
                                   device_.stream));
  }

  void abortStep() override {
    replaying_ = false;
    if (device_.capturing) {
      device_.capturing = false;
      cudaGraph_t graph = nullptr;
      cudaStreamEndCapture(device_.stream, &graph);
      if (graph)
        cudaGraphDestroy(graph);
      cudaGetLastError(); // an invalidated capture is not this error
    }
    recorded_.clear();
    cudaStreamSynchronize(device_.stream);
    destroyGraphs(graphs_.abort(plan_)); // capture again from a warm-up
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
    sampleDeviceMemory(); // the footprint now counts too
    const DeviceAllocator::Stats &s = device_.allocator->stats();
    CudaMemoryStats m;
    m.deviceAllocations =
        s.rawAllocations + arenaAllocations_ + device_.workspace.allocations;
    m.cacheHits = s.cacheHits;
    m.peakReservedBytes = s.peakReservedBytes + peakArenaTotal_;
    m.arenaBytes = arenaTotal_;
    m.graphCaptures = graphCaptures_;
    m.graphLaunches = graphLaunches_;
    m.steps = steps_;
    m.workspaceBytes = device_.workspace.capacity;
    m.accountedBytes = peakArenaTotal_ + device_.workspace.capacity +
                       s.peakReservedBytes + CudaDevice::kCublasWorkspace +
                       sizeof(uint64_t) + sizeof(int32_t);
    m.measuredPeakBytes = device_.measuredPeak.peak();
    m.pinnedHostBytes = pinnedSlotBytes() + kSlots * 2 * sizeof(uint64_t) +
                        sizeof(uint64_t) + sizeof(int32_t);
    return m;
  }

private:
  /// The options with the environment's say (MPC_CUDA_CONV_NHWC=0).
  static CudaBackendOptions withEnvironment(CudaBackendOptions o) {
    o.convNhwc = flagFromEnvironment("MPC_CUDA_CONV_NHWC", o.convNhwc);
    return o;
  }

  void destroyGraphs(const std::vector<void *> &graphs) {
    for (void *g : graphs)
      cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g));
  }

  void sampleDeviceMemory() const {
    size_t freeBytes = 0, totalBytes = 0;
    if (deviceMemory(freeBytes, totalBytes))
      device_.measuredPeak.sample(freeBytes);
  }

  void warnAndStopGraphs(const std::string &what) {
    std::fprintf(stderr,
                 "mpc: warning: capturing the step as a CUDA graph failed "
                 "(%s); running every step without graphs\n",
                 what.c_str());
    destroyGraphs(graphs_.captureFailed());
  }

  /// The capture of the step failed (`what`): it is ended and thrown away,
  /// graphs go off with a warning, and the step's work recorded so far,
  /// none of which ran, runs now in order. A node that fails again fails
  /// for its own reason, which propagates.
  void captureFailed(const std::string &what, bool captureEnded = false) {
    device_.capturing = false;
    if (!captureEnded) {
      cudaGraph_t graph = nullptr;
      cudaStreamEndCapture(device_.stream, &graph);
      if (graph)
        cudaGraphDestroy(graph);
      cudaGetLastError(); // the invalidated capture's error is handled here
    }
    warnAndStopGraphs(what);
    std::vector<Recorded> todo = std::move(recorded_);
    recorded_.clear();
    for (Recorded &r : todo) {
      if (r.ctx)
        run(*r.ctx);
      else
        copyOnDevice(r.dst, r.src, r.bytes);
    }
  }

  /// A download waiting in pinned memory for synchronize().
  struct Pending {
    void *dst;
    const uint8_t *staged;
    size_t bytes;
  };
  /// Pinned staging of downloads (the fetched scalars, up to 1 MiB) and of
  /// uploads (the batch and host-changed state, up to 256 MiB; the state's
  /// first upload, which may be larger, goes the pageable way once).
  /// What one step needs of the host until it has arrived: its pinned
  /// staging, its downloads waiting there, its seed and error words and its
  /// end (an event). Two of them, used in turn, so that the host can set up
  /// the next step while the last one runs (submitStep/waitStep).
  struct StepSlot {
    PinnedBuffer downloads{size_t(1) << 20, 4096};
    PinnedBuffer uploads{size_t(256) << 20, size_t(64) << 10};
    std::vector<Pending> pending;
    uint64_t *words = nullptr; ///< [0]: the seed; [1]: the error word
    cudaEvent_t done = nullptr;
  };
  static constexpr int kSlots = 2;
  StepSlot slots_[kSlots];
  /// Which slots are in flight, in what order, and their steps' errors.
  StepTickets tickets_{kSlots};
  StepSlot &slot() { return slots_[tickets_.current()]; }
  static int32_t *errorWord(StepSlot &s) {
    return reinterpret_cast<int32_t *>(&s.words[1]);
  }
  /// After slot i's work is done: its downloads reach their places, its
  /// staging is free again, and the error its step found is kept for the
  /// wait on its ticket.
  void deliver(int i) {
    StepSlot &s = slots_[i];
    for (const Pending &p : s.pending)
      std::memcpy(p.dst, p.staged, p.bytes);
    s.pending.clear();
    s.downloads.recycle();
    s.uploads.recycle();
    std::string error;
    int32_t code = *errorWord(s);
    if (code > 0) {
      *errorWord(s) = 0;
      std::string where = size_t(code) <= device_.errorNodes.size()
                              ? device_.errorNodes[size_t(code) - 1]
                              : "a node";
      error = where + ": an index or label is out of range (found on the "
                      "device during the step)";
    }
    tickets_.arrived(i, error);
  }
  size_t pinnedSlotBytes() const {
    size_t n = 0;
    for (const StepSlot &s : slots_)
      n += s.downloads.capacity() + s.uploads.capacity();
    return n;
  }
  /// What a step under capture asked for, in order: a node (its context)
  /// or a device copy; run eagerly if the capture fails.
  struct Recorded {
    std::unique_ptr<KernelContext> ctx;
    void *dst = nullptr;
    const void *src = nullptr;
    size_t bytes = 0;
  };
  std::vector<Recorded> recorded_;

  CudaDevice device_;
  GraphCache graphs_;
  uint64_t plan_ = 0, workspaceSeen_ = 0;
  std::map<uint8_t *, size_t> arenas_;
  size_t arenaTotal_ = 0, peakArenaTotal_ = 0, arenaAllocations_ = 0;
  bool replaying_ = false;
  size_t graphCaptures_ = 0, graphLaunches_ = 0, steps_ = 0;
  std::unique_ptr<OpProfile> profile_; ///< MPC_CUDA_PROFILE=1
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
