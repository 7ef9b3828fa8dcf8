// --shard-optimizer's collectives on the GPU (passes/optimizer/
// shard_optimizer.h): mpc.ReduceScatter and mpc.AllGather over NCCL
// (runtime/cuda/nccl_world.h), mpc.RankShard as a device copy. Each value
// is cut as the CPU kernels cut it (kernels/common/shard_rule.h): N chunks
// of ceil(numel / N) elements, the last zero-padded.
//
// The NCCL operands are padded scratch buffers of N whole chunks, so that a
// value whose size is not a multiple of N, and an output the memory plan
// put over an input, never meet NCCL's in-place rules. Narrow gradient
// communication (--grad-comm-dtype) narrows into the scratch and widens the
// reduced chunk, as mpc.AllReduce does on this backend. A gated node
// (--grad-accum) communicates in every micro-batch, as the AllReduce does
// here: a resident step's CUDA graph cannot branch on the gate.
//
// mpc.ShardedClipGradNorm stays a host op (cuda_ops.cpp): its global norm
// sums the squares in fp32 in element order across the ranks, which no
// device kernel does yet.
#include "ir/mpc_ops.h"
#include "kernels/common/all_reduce_rule.h"
#include "kernels/common/shard_rule.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/nccl_world.h"
#include "runtime/cuda/node_staging.h"

#include <cuda_runtime_api.h>

#include <algorithm>

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;
using cpu::shapeString;

/// The node's world size (its world_size attribute), checked against the
/// ranks it runs on; `rank` is this rank.
int64_t shardWorldOf(NodeStaging &s, int &rank) {
  const Collective *world = s.ctx().collective;
  const int64_t n = shardWorldSizeOf(s.node());
  checkShardWorld(s.node(), n, world ? world->size() : 1);
  rank = world ? world->rank() : 0;
  return n;
}

/// How many of a value's `numel` elements chunk q (of `c`) holds.
int64_t chunkFill(int64_t numel, int64_t c, int64_t q) {
  return std::max<int64_t>(0, std::min(c, numel - q * c));
}

/// dst (c elements of `size` bytes) = chunk `q` of src (numel elements),
/// zero past the value's end.
void copyChunk(const void *src, int64_t numel, int64_t c, int64_t q,
               size_t size, void *dst, cudaStream_t stream) {
  const int64_t fill = chunkFill(numel, c, q);
  const auto *from = static_cast<const uint8_t *>(src) + size_t(q * c) * size;
  if (fill && dst != from)
    MPC_CUDA_CHECK(cudaMemcpyAsync(dst, from, size_t(fill) * size,
                                   cudaMemcpyDeviceToDevice, stream));
  if (fill < c)
    MPC_CUDA_CHECK(
        cudaMemsetAsync(static_cast<uint8_t *>(dst) + size_t(fill) * size, 0,
                        size_t(c - fill) * size, stream));
}

/// mpc.RankShard(x1..xn): this rank's chunk of each value.
void runRankShard(NodeStaging &s) {
  const Node &node = s.node();
  int rank = 0;
  const int64_t world = shardWorldOf(s, rank);
  if (node.numInputs() != node.numOutputs() || node.numInputs() == 0)
    fail(node, "has ", node.numInputs(), " inputs but ", node.numOutputs(),
         " outputs (one chunk per value)");
  for (size_t i = 0; i < node.numInputs(); ++i) {
    const Tensor &x = s.in(i, "value");
    const int64_t c = shardChunk(x.numel(), world);
    copyChunk(s.device(i), x.numel(), c, rank, dtypeSize(x.dtype),
              s.out(i, x.dtype, {c}), s.stream());
  }
}

/// mpc.ReduceScatter(g1..gn): this rank's chunk of each value reduced
/// across the ranks (mean, sum or max), one NCCL group.
void runReduceScatter(NodeStaging &s) {
  KernelContext &ctx = s.ctx();
  const Node &node = s.node();
  const size_t first =
      allReduceFirstValue(node, ctx.inputs.size(), ctx.outputs.size());
  const AllReduceOp op = allReduceOpOf(node);
  const DType wire = allReduceWireOf(node);
  int rank = 0;
  const int64_t world = shardWorldOf(s, rank);
  std::vector<DeviceShard> shards, widen;
  for (size_t i = first; i < node.numInputs(); ++i) {
    const Tensor &x = s.in(i, "value");
    checkAllReduceType(node, i, x.dtype, op);
    const int64_t n = x.numel(), c = shardChunk(n, world);
    void *dst = s.out(i - first, x.dtype, {c});
    if (world == 1) {
      copyChunk(s.device(i), n, c, 0, dtypeSize(x.dtype), dst, s.stream());
      continue;
    }
    const DType onWire = allReduceWireTypeFor(x.dtype, wire);
    if (onWire != x.dtype && x.dtype != DType::F32)
      fail(node, "the cuda backend sends fp32 values as ", dtypeName(onWire),
           ", not ", dtypeName(x.dtype));
    const size_t size = dtypeSize(onWire);
    void *whole = s.scratch(size_t(c * world) * size);
    MPC_CUDA_CHECK(
        cudaMemsetAsync(whole, 0, size_t(c * world) * size, s.stream()));
    if (onWire != x.dtype)
      launchCast(x.dtype, onWire, s.device(i), whole, n, s.stream());
    else if (n)
      MPC_CUDA_CHECK(cudaMemcpyAsync(whole, s.device(i), size_t(n) * size,
                                     cudaMemcpyDeviceToDevice, s.stream()));
    if (onWire != x.dtype) {
      void *narrow = s.scratch(size_t(c) * size);
      shards.push_back({whole, narrow, onWire, size_t(c)});
      widen.push_back({narrow, dst, onWire, size_t(c)});
    } else {
      shards.push_back({whole, dst, x.dtype, size_t(c)});
    }
  }
  if (world == 1)
    return;
  ncclReduceScatter(s.cudaDevice(), *ctx.collective, node, int(op), shards);
  for (const DeviceShard &r : widen)
    launchCast(r.dtype, DType::F32, r.whole, r.chunk, int64_t(r.count),
               s.stream());
}

/// mpc.AllGather(s1..sn, like1..liken), or (s1..sn) <shapes>: every rank's
/// chunks into whole values shaped like the `like` inputs (or as `shapes`
/// says), one NCCL group.
void runAllGather(NodeStaging &s) {
  KernelContext &ctx = s.ctx();
  const Node &node = s.node();
  int rank = 0;
  const int64_t world = shardWorldOf(s, rank);
  const size_t n = node.numOutputs();
  // The shape form (sharded fp32 masters): the dims are the node's.
  const std::vector<std::vector<int64_t>> shapes = allGatherShapes(node, n);
  const size_t inputs = shapes.empty() ? 2 * n : n;
  if (n == 0 || node.numInputs() != inputs)
    fail(node, "has ", node.numInputs(), " inputs and ", node.numOutputs(),
         " outputs (expected n chunks, n values they are chunks of or the "
         "shapes attribute, n outputs)");
  struct Out {
    void *whole;
    DType dtype;
    std::vector<int64_t> dims;
    int64_t numel;
  };
  std::vector<DeviceShard> shards;
  std::vector<Out> outs;
  for (size_t i = 0; i < n; ++i) {
    const Tensor &chunk = s.in(i, "chunk");
    const Tensor *like = shapes.empty() ? &s.in(n + i, "like") : nullptr;
    const std::vector<int64_t> dims = like ? like->dims : shapes[i];
    const DType type = like ? like->dtype : chunk.dtype;
    int64_t numel = 1;
    for (int64_t d : dims)
      numel *= d;
    const int64_t c = shardChunk(numel, world);
    if (chunk.dtype != type || chunk.numel() != c)
      fail(node, "chunk ", i, " is ", dtypeName(chunk.dtype), " ",
           shapeString(chunk.dims), " but a chunk of ", dtypeName(type), " ",
           shapeString(dims), " over ", world, " ranks is ", dtypeName(type),
           " [", c, "]");
    const size_t size = dtypeSize(type);
    void *whole = s.scratch(size_t(c * world) * size);
    if (world == 1 && c)
      MPC_CUDA_CHECK(cudaMemcpyAsync(whole, s.device(i), size_t(c) * size,
                                     cudaMemcpyDeviceToDevice, s.stream()));
    shards.push_back({whole, const_cast<void *>(s.device(i)), type, size_t(c)});
    outs.push_back({whole, type, dims, numel});
  }
  if (world > 1)
    ncclAllGather(s.cudaDevice(), *ctx.collective, node, shards);
  // The outputs only now: one may lie over a chunk or a `like` input.
  for (size_t i = 0; i < n; ++i) {
    const Out &o = outs[i];
    void *y = s.out(i, o.dtype, o.dims);
    if (o.numel)
      MPC_CUDA_CHECK(cudaMemcpyAsync(y, o.whole,
                                     size_t(o.numel) * dtypeSize(o.dtype),
                                     cudaMemcpyDeviceToDevice, s.stream()));
  }
}

} // namespace

std::vector<CudaOpEntry> shardOps() {
  return {
      {kMpcDomain, "RankShard", runRankShard, noCheck},
      {kMpcDomain, "ReduceScatter", runReduceScatter, noCheck},
      {kMpcDomain, "AllGather", runAllGather, noCheck},
  };
}

} // namespace cuda
} // namespace mpc
