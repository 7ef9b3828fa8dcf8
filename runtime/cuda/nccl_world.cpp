// mpc.AllReduce, and --shard-optimizer's mpc.ReduceScatter and
// mpc.AllGather, on the GPU across ranks with NCCL (nccl_world.h).
//
// Bounded waits: NCCL has no timeout of its own (a stopped rank leaves the
// others' kernels spinning). An all-reduce that runs outside a CUDA graph
// capture is waited for here by polling its completion event and NCCL's
// asynchronous error; when neither moves for the world's collective timeout
// (mpc-run --collective-timeout) the communicator is aborted
// (ncclCommAbort, which ends its kernels) and the node fails with a line.
// A watchdog thread polls the asynchronous error while the communicator
// lives (a rank that died breaks NCCL's connections: NCCL reports it), and
// ends this rank with a line when NCCL reports one, also while a CUDA graph
// replays the all-reduce where no host code waits for it. NCCL cannot say
// which rank is missing; the host world's next collective names it.
#include "runtime/cuda/nccl_world.h"

#include "kernels/common/all_reduce_rule.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/cuda_check.h"

#ifdef MPC_HAVE_NCCL
#include <dlfcn.h>
#include <nccl.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>

namespace mpc {
namespace cuda {

#ifdef MPC_HAVE_NCCL

namespace {

/// NCCL's entry points, from libnccl.so.2 loaded on the first multi-rank
/// reduction: the backend's plugin does not link NCCL (a 200 MB library
/// that single-GPU runs never use and a GPU machine may keep elsewhere).
struct NcclApi {
  decltype(&::ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&::ncclCommInitRank) commInitRank = nullptr;
  decltype(&::ncclCommDestroy) commDestroy = nullptr;
  decltype(&::ncclAllReduce) allReduce = nullptr;
  decltype(&::ncclReduceScatter) reduceScatter = nullptr;
  decltype(&::ncclAllGather) allGather = nullptr;
  decltype(&::ncclGroupStart) groupStart = nullptr;
  decltype(&::ncclGroupEnd) groupEnd = nullptr;
  decltype(&::ncclGetErrorString) errorString = nullptr;
  decltype(&::ncclCommGetAsyncError) asyncError = nullptr;
  decltype(&::ncclCommAbort) commAbort = nullptr;
};

/// The loaded API, or null with `why` (once per process).
const NcclApi *ncclApi(std::string &why) {
  static std::string loadError;
  static const NcclApi *api = [&]() -> const NcclApi * {
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#ifdef MPC_NCCL_LIBRARY
    if (!h)
      h = dlopen(MPC_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h) {
      const char *e = dlerror();
      loadError = std::string("cannot load libnccl.so.2 (") +
                  (e ? e : "not found") + ")";
      return nullptr;
    }
    static NcclApi a;
    bool ok = true;
    auto get = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(h, name));
      ok = ok && fn;
    };
    get(a.getUniqueId, "ncclGetUniqueId");
    get(a.commInitRank, "ncclCommInitRank");
    get(a.commDestroy, "ncclCommDestroy");
    get(a.allReduce, "ncclAllReduce");
    get(a.reduceScatter, "ncclReduceScatter");
    get(a.allGather, "ncclAllGather");
    get(a.groupStart, "ncclGroupStart");
    get(a.groupEnd, "ncclGroupEnd");
    get(a.errorString, "ncclGetErrorString");
    get(a.asyncError, "ncclCommGetAsyncError");
    get(a.commAbort, "ncclCommAbort");
    if (!ok) {
      loadError = "libnccl.so.2 lacks an entry point mpc uses";
      return nullptr;
    }
    return &a;
  }();
  if (!api)
    why = loadError;
  return api;
}

const NcclApi &requireNccl(const Node &node) {
  std::string why;
  const NcclApi *api = ncclApi(why);
  if (!api)
    cpu::fail(node, why, ": the cuda backend combines ranks with NCCL");
  return *api;
}

void check(const Node &node, ncclResult_t r, const char *what) {
  if (r != ncclSuccess)
    cpu::fail(node, "NCCL ", what,
              " failed: ", requireNccl(node).errorString(r));
}

ncclDataType_t ncclType(const Node &node, DType t) {
  switch (t) {
  case DType::F32:
    return ncclFloat32;
  case DType::F16:
    return ncclFloat16;
  case DType::BF16:
    return ncclBfloat16;
  case DType::F64:
    return ncclFloat64;
  case DType::I64:
    return ncclInt64;
  case DType::I32:
    return ncclInt32;
  case DType::I8:
    return ncclInt8;
  case DType::U8:
  case DType::Bool: // max of 0/1 bytes is OR
    return ncclUint8;
  default:
    cpu::fail(node, "NCCL has no type for ", dtypeName(t));
  }
}

/// Polls a communicator's asynchronous error while it lives: a rank whose
/// peer died would otherwise wait in a kernel that never ends (a CUDA
/// graph's replay has no host code waiting with a timeout). It only calls
/// NCCL (no CUDA call: one could break a capture on the main thread).
class NcclWatchdog {
public:
  NcclWatchdog(const NcclApi &nccl, ncclComm_t comm, Collective &world)
      : thread_([this, &nccl, comm, &world] {
          while (!stop_.load()) {
            ncclResult_t err = ncclSuccess;
            if (nccl.asyncError(comm, &err) == ncclSuccess &&
                err != ncclSuccess && err != ncclInProgress) {
              nccl.commAbort(comm);
              std::string line =
                  "mpc-run: rank " + std::to_string(world.rank()) +
                  ": NCCL failed during an all-reduce (" +
                  nccl.errorString(err) +
                  "): another rank stopped or its connection broke\n";
              std::fwrite(line.data(), 1, line.size(), stderr);
              world.abort(1);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }) {}
  ~NcclWatchdog() {
    stop_.store(true);
    thread_.join();
  }

private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// The watchdog of this process's communicator (one GPU per rank).
std::unique_ptr<NcclWatchdog> &watchdog() {
  static std::unique_ptr<NcclWatchdog> w;
  return w;
}

/// Waits for the collective (`what`: "all-reduce", ...) just enqueued on
/// the device's stream, polling its event and NCCL's asynchronous error;
/// silence for the world's collective timeout aborts the communicator and
/// fails the node.
void awaitCollective(CudaDevice &device, Collective &world, const Node &node,
                     const NcclApi &nccl, ncclComm_t comm, const char *what) {
  cudaEvent_t done = nullptr;
  MPC_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  MPC_CUDA_CHECK(cudaEventRecord(done, device.stream));
  const auto start = std::chrono::steady_clock::now();
  const auto patience = std::chrono::milliseconds(
      int64_t(std::min(world.timeoutSeconds(), 1e9) * 1e3 + 0.5));
  for (int polls = 0;; ++polls) {
    cudaError_t q = cudaEventQuery(done);
    if (q == cudaSuccess)
      break;
    if (q != cudaErrorNotReady) {
      cudaEventDestroy(done);
      MPC_CUDA_CHECK(q);
    }
    ncclResult_t err = ncclSuccess;
    nccl.asyncError(comm, &err);
    const bool late = std::chrono::steady_clock::now() - start >= patience;
    if ((err != ncclSuccess && err != ncclInProgress) || late) {
      watchdog().reset(); // it polls the communicator: stop it first
      nccl.commAbort(comm);
      device.nccl = nullptr; // aborted: nothing to destroy
      cudaEventDestroy(done);
      if (late)
        cpu::fail(node, "the NCCL ", what, " did not complete in ",
                  world.timeoutSeconds(),
                  " s (--collective-timeout): another rank is stopped, hung "
                  "or unreachable");
      cpu::fail(node, "NCCL failed during the ", what, " (",
                nccl.errorString(err),
                "): another rank stopped or its connection broke");
    }
    // The first polls spin (a step's all-reduce is usually quick).
    if (polls > 1000)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    else
      std::this_thread::yield();
  }
  cudaEventDestroy(done);
}

/// The device's communicator, made on first use (see the header).
ncclComm_t commOf(CudaDevice &device, Collective &world, const Node &node) {
  if (device.nccl)
    return static_cast<ncclComm_t>(device.nccl);
  if (device.capturing)
    cpu::fail(node, "the NCCL communicator cannot be made while a CUDA graph "
                    "is being captured");
  const NcclApi &nccl = requireNccl(node);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (world.rank() == 0)
    check(node, nccl.getUniqueId(&id), "ncclGetUniqueId");
  world.broadcast(&id, sizeof id, 0);
  MPC_CUDA_CHECK(cudaSetDevice(device.options.device));
  ncclComm_t comm = nullptr;
  check(node, nccl.commInitRank(&comm, world.size(), id, world.rank()),
        "ncclCommInitRank");
  device.nccl = comm;
  watchdog() = std::make_unique<NcclWatchdog>(nccl, comm, world);
  return comm;
}

/// NCCL's operation for mpc.AllReduce's `reduction` (ReduceScatter's too).
ncclRedOp_t ncclOpOf(int reduction) {
  switch (AllReduceOp(reduction)) {
  case AllReduceOp::Mean:
    return ncclAvg;
  case AllReduceOp::Sum:
    return ncclSum;
  case AllReduceOp::Max:
    return ncclMax;
  }
  return ncclSum;
}

} // namespace

void ncclAllReduce(CudaDevice &device, Collective &world, const Node &node,
                   int reduction, const std::vector<DeviceReduction> &ops) {
  const NcclApi &nccl = requireNccl(node);
  ncclComm_t comm = commOf(device, world, node);
  const ncclRedOp_t op = ncclOpOf(reduction);
  check(node, nccl.groupStart(), "ncclGroupStart");
  for (const DeviceReduction &r : ops)
    if (r.count)
      check(node,
            nccl.allReduce(r.in, r.out, r.count, ncclType(node, r.dtype), op,
                           comm, device.stream),
            "ncclAllReduce");
  check(node, nccl.groupEnd(), "ncclGroupEnd");
  // Inside a capture the graph's replay runs it later; the watchdog is
  // what bounds that wait (for a rank that died).
  if (!device.capturing)
    awaitCollective(device, world, node, nccl, comm, "all-reduce");
}

void ncclReduceScatter(CudaDevice &device, Collective &world, const Node &node,
                       int reduction, const std::vector<DeviceShard> &ops) {
  const NcclApi &nccl = requireNccl(node);
  ncclComm_t comm = commOf(device, world, node);
  const ncclRedOp_t op = ncclOpOf(reduction);
  check(node, nccl.groupStart(), "ncclGroupStart");
  for (const DeviceShard &r : ops)
    if (r.count)
      check(node,
            nccl.reduceScatter(r.whole, r.chunk, r.count,
                               ncclType(node, r.dtype), op, comm,
                               device.stream),
            "ncclReduceScatter");
  check(node, nccl.groupEnd(), "ncclGroupEnd");
  if (!device.capturing)
    awaitCollective(device, world, node, nccl, comm, "reduce-scatter");
}

void ncclAllGather(CudaDevice &device, Collective &world, const Node &node,
                   const std::vector<DeviceShard> &ops) {
  const NcclApi &nccl = requireNccl(node);
  ncclComm_t comm = commOf(device, world, node);
  check(node, nccl.groupStart(), "ncclGroupStart");
  for (const DeviceShard &r : ops)
    if (r.count)
      check(node,
            nccl.allGather(r.chunk, r.whole, r.count, ncclType(node, r.dtype),
                           comm, device.stream),
            "ncclAllGather");
  check(node, nccl.groupEnd(), "ncclGroupEnd");
  if (!device.capturing)
    awaitCollective(device, world, node, nccl, comm, "all-gather");
}

void destroyNcclComm(CudaDevice &device) {
  std::string why;
  watchdog().reset(); // before the communicator it polls goes
  if (device.nccl)
    if (const NcclApi *api = ncclApi(why)) // made by it: loaded
      api->commDestroy(static_cast<ncclComm_t>(device.nccl));
  device.nccl = nullptr;
}

#else // no NCCL in this build

void ncclAllReduce(CudaDevice &, Collective &world, const Node &node, int,
                   const std::vector<DeviceReduction> &) {
  cpu::fail(node, "this build's cuda backend has no NCCL to combine ",
            world.size(),
            " ranks (rebuild where the CUDA toolkit's nccl.h and libnccl "
            "are); run the ranks with --device=cpu");
}

void ncclReduceScatter(CudaDevice &, Collective &world, const Node &node, int,
                       const std::vector<DeviceShard> &) {
  cpu::fail(node, "this build's cuda backend has no NCCL to combine ",
            world.size(),
            " ranks (rebuild where the CUDA toolkit's nccl.h and libnccl "
            "are); run the ranks with --device=cpu");
}

void ncclAllGather(CudaDevice &, Collective &world, const Node &node,
                   const std::vector<DeviceShard> &) {
  cpu::fail(node, "this build's cuda backend has no NCCL to combine ",
            world.size(),
            " ranks (rebuild where the CUDA toolkit's nccl.h and libnccl "
            "are); run the ranks with --device=cpu");
}

void destroyNcclComm(CudaDevice &) {}

#endif

} // namespace cuda
} // namespace mpc
