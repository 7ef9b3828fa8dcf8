// Shape rules of the sharded optimizer's ops (--shard-optimizer,
// ir/mpc_ops.h): mpc.ReduceScatter, mpc.RankShard, mpc.AllGather and
// mpc.ShardedClipGradNorm. A chunk of a value of n elements over
// world_size ranks is 1-D of ceil(n / world_size) elements
// (kernels/common/shard_rule.h).
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"
#include "kernels/common/all_reduce_rule.h"
#include "kernels/common/shard_rule.h"

namespace mpc::shape_rules {

namespace {

/// Output i: the 1-D chunk of input v over `worldSize` ranks, of dtype t
/// (unknown length while v's element count is).
void setChunkOf(Ctx &c, size_t i, DType t, const Value *v, int64_t worldSize) {
  int64_t numel = 1;
  bool known = v->hasShape;
  if (known)
    for (const Dim &d : v->dims) {
      if (!d.isKnown()) {
        known = false;
        break;
      }
      numel *= d.value;
    }
  if (known)
    c.set(i, shaped(t, {Dim(shardChunk(numel, worldSize))}));
  else
    c.set(i, shaped(t, {Dim()}));
}

void inferReduceScatter(Ctx &c) {
  const size_t first =
      allReduceFirstValue(c.n, c.n.numInputs(), c.n.numOutputs());
  const AllReduceOp op = allReduceOpOf(c.n);
  allReduceWireOf(c.n);
  const int64_t world = shardWorldSizeOf(c.n);
  if (first) {
    c.req(0);
    requireScalar(c, 0, DType::Bool, "gate");
  }
  for (size_t i = first; i < c.n.numInputs(); ++i) {
    Value *x = c.req(i);
    checkAllReduceType(c.n, i, x->dtype, op);
    setChunkOf(c, i - first, x->dtype, x, world);
  }
}

void inferRankShard(Ctx &c) {
  const int64_t world = shardWorldSizeOf(c.n);
  if (c.n.numInputs() != c.n.numOutputs())
    fail([&] {
      errorAt(c.n) << "has " << c.n.numInputs() << " inputs but "
                   << c.n.numOutputs() << " outputs (one chunk per value)";
    });
  for (size_t i = 0; i < c.n.numInputs(); ++i) {
    Value *x = c.req(i);
    setChunkOf(c, i, x->dtype, x, world);
  }
}

void inferAllGather(Ctx &c) {
  shardWorldSizeOf(c.n);
  const size_t n = c.n.numOutputs();
  const std::vector<std::vector<int64_t>> shapes = allGatherShapes(c.n, n);
  if (!shapes.empty()) {
    // The shape form: the dims are the node's, the dtype the chunk's.
    if (c.n.numInputs() != n)
      fail([&] {
        errorAt(c.n) << "has " << c.n.numInputs() << " inputs but " << n
                     << " outputs and shapes (expected a chunk per output)";
      });
    for (size_t i = 0; i < n; ++i) {
      Dims dims;
      for (int64_t d : shapes[i])
        dims.push_back(Dim(d));
      c.set(i, shaped(c.req(i)->dtype, dims));
    }
    return;
  }
  if (c.n.numInputs() != 2 * n)
    fail([&] {
      errorAt(c.n) << "has " << c.n.numInputs() << " inputs but " << n
                   << " outputs (expected a chunk and the value it is a "
                      "chunk of per output)";
    });
  for (size_t i = 0; i < n; ++i) {
    Value *s = c.req(i);
    Value *like = c.req(n + i);
    if (s->dtype != DType::Undefined && like->dtype != DType::Undefined &&
        s->dtype != like->dtype)
      fail([&] {
        errorAt(c.n) << "chunk " << i << " is " << typeText(s)
                     << " but the value it is a chunk of is " << typeText(like);
      });
    c.setLike(i, like);
  }
}

void inferShardedClipGradNorm(Ctx &c) {
  shardWorldSizeOf(c.n);
  inferClipGradNormLike(c, "gradient chunks");
}

const OpRule kRules[] = {
    {kMpcDomain, "ReduceScatter", 1, kAny, 1, kAny, inferReduceScatter},
    {kMpcDomain, "RankShard", 1, kAny, 1, kAny, inferRankShard},
    {kMpcDomain, "AllGather", 1, kAny, 1, kAny, inferAllGather},
    {kMpcDomain, "ShardedClipGradNorm", 1, kAny, 2, kAny,
     inferShardedClipGradNorm},
};

} // namespace

RuleRows shardRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
