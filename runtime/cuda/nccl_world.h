// The CUDA backend's side of data parallelism: mpc.AllReduce, and
// --shard-optimizer's mpc.ReduceScatter and mpc.AllGather, across the ranks
// of a multi-rank launch (mpirun, torchrun) with NCCL, on the device's
// stream.
//
// Each rank's backend runs on its own GPU (mpc-run gives rank r of a node
// its local rank's device). The first multi-rank AllReduce makes the
// device's NCCL communicator: rank 0 draws NCCL's unique id and the host
// world (kernels/collective.h: MPI or TCP) broadcasts it. That first run is a
// step's first, never one being captured into a CUDA graph (the backend
// captures on the second); later runs are plain stream work, which NCCL
// lets a capture record.
//
// Numerics: NCCL hands every rank the same reduced bits (each element is
// reduced once and then copied to every rank), so the ranks stay in
// lockstep as on the CPU; but its summation order is its algorithm's, not
// the CPU kernel's rank order in double, so a CUDA run's averages can
// differ from a CPU run's in the last bits. The sharded step's collectives
// follow the same rule: ncclReduceScatter reduces each element once, on the
// rank that keeps it (the chunk's owner, as the CPU kernel does; NCCL's
// order within an element's sum is its algorithm's, as for the
// all-reduce), and ncclAllGather only copies, so every rank holds the same
// bits of every gathered value.
#pragma once

#include "kernels/collective.h"
#include "runtime/cuda/cuda_device.h"

#include <memory>
#include <vector>

namespace mpc {
namespace cuda {

/// One operand of a reduction: device addresses, element type and count.
struct DeviceReduction {
  const void *in = nullptr;
  void *out = nullptr;
  DType dtype = DType::F32;
  size_t count = 0;
};

/// Reduces every operand across `world` (mean, sum or max, as
/// mpc.AllReduce's `reduction`; the caller has checked the types) into its
/// output, as one NCCL group on device.stream. Throws mpc::Error naming
/// `node` when NCCL fails or this build has none.
void ncclAllReduce(CudaDevice &device, Collective &world, const Node &node,
                   int reduction, const std::vector<DeviceReduction> &ops);

/// One operand of a reduce-scatter or all-gather: `whole` holds count x
/// world.size() elements (a value zero-padded to whole chunks of
/// kernels/common/shard_rule.h), `chunk` this rank's `count` of them
/// (elements rank*count ...).
struct DeviceShard {
  void *whole = nullptr;
  void *chunk = nullptr;
  DType dtype = DType::F32;
  size_t count = 0;
};

/// Reduces every operand's `whole` across `world` (mean, sum or max, as
/// mpc.ReduceScatter's `reduction`) into this rank's `chunk`, as one NCCL
/// group on device.stream. Throws mpc::Error naming `node` as
/// ncclAllReduce does.
void ncclReduceScatter(CudaDevice &device, Collective &world, const Node &node,
                       int reduction, const std::vector<DeviceShard> &ops);

/// Every rank's `chunk` of every operand into its `whole`, in rank order,
/// as one NCCL group on device.stream.
void ncclAllGather(CudaDevice &device, Collective &world, const Node &node,
                   const std::vector<DeviceShard> &ops);

/// Releases the device's communicator (from ~CudaDevice).
void destroyNcclComm(CudaDevice &device);

} // namespace cuda
} // namespace mpc
