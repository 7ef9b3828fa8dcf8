// mpc.AllReduce on the CPU: combines each input across the ranks of the
// data-parallel world (kernels/collective.h) in rank order.
//
// AllReduce(x1..xn) <reduction = "mean" | "sum" | "max"> -> (y1..yn)
// (ir/mpc_ops.h). The inputs travel as one message, each at an
// offset aligned to 8 bytes, cut into one shard per rank at 8-byte
// boundaries (so no element straddles two shards). A reduce-scatter, then an
// all-gather: rank r receives every rank's shard r (allToAll), reduces it
// element by element in rank order (floating point: a double sum of the
// ranks' values, divided by the number of ranks for "mean", rounded once to
// the value's type; "max" of bool is OR, of floating point NaN-propagating),
// and every rank gathers the reduced shards. Each element is reduced by one
// rank, so every rank holds the same bits, and each rank moves about twice
// the message whatever the number of ranks. The message is one buffer that
// every step reuses (per thread), and every stage works in it in place: a
// fresh buffer per call (page faults) and a copy per stage made resnet18's
// step on 2 ranks 256 ms instead of 195 (bench/sync_batch_norm.sh).
// With a wire_dtype (--grad-comm-dtype), fp32/fp64 values cross ranks in
// it: each rank's values rounded to it (nearest-even) in the message, the
// reduction rounded once to it, then widened back into the outputs; half
// the bytes to move, as DDP's bf16/fp16 compression hooks.
// A world of one rank copies, and
// so does every rank of a gated node whose gate is false (--grad-accum
// inside its window: the ranks agree, their counters are the same).
//
// The sharded optimizer's ops (--shard-optimizer; ir/mpc_ops.h) are here
// too: ReduceScatter (the first half of the above on chunks of every
// value, with the same reduction), RankShard, AllGather, and
// ShardedClipGradNorm, whose norm has the unsharded clip's bits.
#include "ir/mpc_ops.h"
#include "ir/round_to_odd.h"
#include "kernels/common/all_reduce_rule.h"
#include "kernels/common/clip_grad_norm_math.h"
#include "kernels/common/shard_rule.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/half_convert.h"

#include <cmath>

namespace mpc {
namespace cpu {

namespace {

using Reduction = AllReduceOp;

constexpr size_t kAlign = 8; // the largest element size

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// `count` elements of type `t` at `p`, as a tensor that views them.
Tensor viewOf(DType t, const uint8_t *p, int64_t count) {
  Tensor v;
  v.dtype = t;
  v.dims = {count};
  v.bytes =
      ByteBuffer::view(const_cast<uint8_t *>(p), size_t(count) * dtypeSize(t));
  return v;
}

/// dst[k] = the reduction over ranks q (in order) of srcs[q][k], for
/// `count` elements of type `t`. dst may be one of the srcs (element k is
/// written after every rank's element k is read).
void reduceRange(DType t, const std::vector<const uint8_t *> &srcs,
                 uint8_t *dst, int64_t count, Reduction red) {
  const size_t ranks = srcs.size();
  // The gradients' case (fp32 mean) streams the floats, element by element
  // over the ranks; the general loop below goes through a dtype switch per
  // element.
  if (t == DType::F32 && red != Reduction::Max) {
    std::vector<const float *> p;
    for (const uint8_t *src : srcs)
      p.push_back(reinterpret_cast<const float *>(src));
    float *out = reinterpret_cast<float *>(dst);
    const double divisor = red == Reduction::Mean ? double(ranks) : 1.0;
    if (ranks == 2) { // the common case, which the compiler vectorises
      const float *a = p[0], *b = p[1];
      for (int64_t i = 0; i < count; ++i)
        out[i] = float((double(a[i]) + double(b[i])) / divisor);
      return;
    }
    for (int64_t i = 0; i < count; ++i) {
      double sum = 0;
      for (size_t q = 0; q < ranks; ++q)
        sum += double(p[q][i]);
      out[i] = float(sum / divisor);
    }
    return;
  }
  // fp16/bf16 (the wire of --grad-comm-dtype): widened exactly, summed in
  // double, rounded once (round to odd, then the narrow type's RNE), a
  // block at a time (small buffers; the widening vectorised).
  if ((t == DType::F16 || t == DType::BF16) && red != Reduction::Max) {
    const bool half = t == DType::F16;
    const double divisor = red == Reduction::Mean ? double(ranks) : 1.0;
    constexpr int64_t kBlock = 1024;
    float wide[kBlock];
    double sum[kBlock];
    auto *out = reinterpret_cast<uint16_t *>(dst);
    for (int64_t at = 0; at < count; at += kBlock) {
      const int64_t n = std::min(kBlock, count - at);
      std::fill(sum, sum + n, 0.0);
      for (const uint8_t *src : srcs) {
        const auto *p = reinterpret_cast<const uint16_t *>(src) + at;
        if (half)
          halfToFloatN(p, wide, n);
        else
          bf16ToFloatN(p, wide, n);
        for (int64_t i = 0; i < n; ++i)
          sum[i] += double(wide[i]);
      }
      // Every rank's element read: the block may be written (dst may be a
      // src).
      for (int64_t i = 0; i < n; ++i)
        wide[i] = roundToOddFloat(sum[i] / divisor);
      if (half)
        floatToHalfN(wide, out + at, n);
      else
        floatToBf16N(wide, out + at, n);
    }
    return;
  }
  std::vector<double> acc(size_t(count), 0.0);
  for (size_t q = 0; q < ranks; ++q) {
    Tensor v = viewOf(t, srcs[q], count);
    for (int64_t i = 0; i < count; ++i) {
      double x = v.getAsDouble(i);
      double &a = acc[size_t(i)];
      if (red != Reduction::Max)
        a += x;
      else if (q == 0 || std::isnan(x) || (!std::isnan(a) && x > a))
        a = x;
    }
  }
  Tensor out = viewOf(t, dst, count);
  for (int64_t i = 0; i < count; ++i)
    out.setFromDouble(i, red == Reduction::Mean ? acc[size_t(i)] / double(ranks)
                                                : acc[size_t(i)]);
}

/// x's values into the message at `dst` as type `wire`: its bytes, or
/// converted by the Cast kernel (nearest-even; fp64 rounded once).
void toWire(const Node &node, const Tensor &x, DType wire, uint8_t *dst) {
  if (wire == x.dtype) {
    if (x.byteSize())
      std::memcpy(dst, x.bytes.data(), x.byteSize());
    return;
  }
  Tensor view = viewOf(wire, dst, x.numel());
  view.dims = x.dims;
  castWithCastKernel(node, x, wire, &view, 0);
}

/// The reduced values at `src` (type `wire`) into y, widened by the Cast
/// kernel to y's type.
void fromWire(const Node &node, const uint8_t *src, DType wire, Tensor &y) {
  if (wire == y.dtype) {
    if (y.byteSize())
      std::memcpy(y.bytes.data(), src, y.byteSize());
    return;
  }
  Tensor view = viewOf(wire, src, y.numel());
  view.dims = y.dims;
  castWithCastKernel(node, view, y.dtype, &y, 0);
}

/// The optional gate of AllReduce and ReduceScatter (input 0 when `first`
/// is 1): whether the ranks communicate in this run.
bool gateIsOpen(KernelContext &ctx, size_t first) {
  if (!first)
    return true;
  const Tensor &gate = input(ctx, 0, "gate");
  if (gate.dtype != DType::Bool || gate.numel() != 1)
    fail(ctx.node, "gate must be a bool scalar, got ", dtypeName(gate.dtype),
         " ", shapeString(gate.dims));
  return gate.bytes[0] != 0;
}

void kernelAllReduce(KernelContext &ctx) {
  const Node &node = ctx.node;
  const size_t first =
      allReduceFirstValue(node, ctx.inputs.size(), ctx.outputs.size());
  const Reduction red = allReduceOpOf(node);
  const DType wire = allReduceWireOf(node);
  // The reduced values (after the gate), and the message's layout: value i
  // at offsets[i], as wireTypes[i] (its own type, or the wire's).
  std::vector<const Tensor *> xs;
  std::vector<DType> wireTypes;
  std::vector<size_t> offsets, wireBytes;
  size_t total = 0;
  for (size_t i = first; i < ctx.inputs.size(); ++i) {
    const Tensor &x = input(ctx, i, "value");
    checkAllReduceType(node, i, x.dtype, red);
    xs.push_back(&x);
    wireTypes.push_back(allReduceWireTypeFor(x.dtype, wire));
    wireBytes.push_back(size_t(x.numel()) * dtypeSize(wireTypes.back()));
    offsets.push_back(total);
    total += alignUp(wireBytes.back());
  }
  // Whether the ranks communicate in this run.
  const bool open = gateIsOpen(ctx, first);
  Collective *world = ctx.collective;
  const int ranks = world ? world->size() : 1;
  if (ranks == 1 || !open) {
    for (size_t i = 0; i < xs.size(); ++i) {
      const Tensor &x = *xs[i];
      Tensor &y = ctx.out(i, x.dtype, x.dims);
      if (y.bytes.data() != x.bytes.data() && x.byteSize())
        std::memcpy(y.bytes.data(), x.bytes.data(), x.byteSize());
    }
    return;
  }
  const size_t shard = alignUp((total + size_t(ranks) - 1) / size_t(ranks));
  // The message, reused by every call on this thread: its pages stay
  // mapped. The gaps between values are zeroed (they travel too).
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < shard * size_t(ranks))
    buffer.resize(shard * size_t(ranks));
  uint8_t *message = buffer.data();
  size_t end = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    std::memset(message + end, 0, offsets[i] - end);
    toWire(node, *xs[i], wireTypes[i], message + offsets[i]);
    end = offsets[i] + wireBytes[i];
  }
  std::memset(message + end, 0, shard * size_t(ranks) - end);

  // Reduce-scatter, in place: block q becomes rank q's shard for this rank,
  // reduced into this rank's own block.
  world->allToAll(message, shard, message);
  const size_t lo = size_t(world->rank()) * shard, hi = lo + shard;
  for (size_t i = 0; i < xs.size(); ++i) {
    size_t a = std::max(offsets[i], lo),
           b = std::min(offsets[i] + wireBytes[i], hi);
    if (a >= b)
      continue;
    const size_t size = dtypeSize(wireTypes[i]);
    std::vector<const uint8_t *> srcs;
    for (int q = 0; q < ranks; ++q)
      srcs.push_back(message + size_t(q) * shard + (a - lo));
    reduceRange(wireTypes[i], srcs, message + a, int64_t((b - a) / size), red);
  }

  // All-gather, in place: every rank's reduced shard, which together are
  // the reduced message in its layout.
  world->allGather(message + lo, shard, message);
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor &x = *xs[i];
    fromWire(node, message + offsets[i], wireTypes[i],
             ctx.out(i, x.dtype, x.dims));
  }
}

// --- the sharded optimizer (--shard-optimizer) ------------------------------
// A value of n elements is cut into world_size chunks of c = ceil(n /
// world_size) elements (kernels/common/shard_rule.h); rank r's is elements
// r*c .. r*c+c-1 of its flattened form, zeros past n.

/// The node's world_size, checked against the world it runs in.
int64_t shardWorld(const KernelContext &ctx, int &rank) {
  const int64_t n = shardWorldSizeOf(ctx.node);
  Collective *world = ctx.collective;
  checkShardWorld(ctx.node, n, world ? world->size() : 1);
  rank = world ? world->rank() : 0;
  return n;
}

/// Elements of chunk q of a value of `numel` elements (c each) that lie
/// inside it (the rest of the chunk is padding).
int64_t chunkFill(int64_t numel, int64_t c, int64_t q) {
  return std::max<int64_t>(0, std::min(c, numel - q * c));
}

/// Chunk q of x (c elements, zero padded) into y, in x's type.
void copyChunk(const Tensor &x, int64_t c, int64_t q, Tensor &y) {
  const int64_t fill = chunkFill(x.numel(), c, q);
  const size_t size = dtypeSize(x.dtype);
  if (fill)
    std::memcpy(y.bytes.data(), x.bytes.data() + size_t(q * c) * size,
                size_t(fill) * size);
  std::memset(y.bytes.data() + size_t(fill) * size, 0, size_t(c - fill) * size);
}

/// Chunk q of x (c elements, zero padded) into `dst`, as type `wire`.
void chunkToWire(const Node &node, const Tensor &x, int64_t c, int64_t q,
                 DType wire, uint8_t *dst) {
  const int64_t fill = chunkFill(x.numel(), c, q);
  const size_t size = dtypeSize(x.dtype);
  Tensor part = viewOf(x.dtype, x.bytes.data() + size_t(q * c) * size, fill);
  toWire(node, part, wire, dst);
  std::memset(dst + size_t(fill) * dtypeSize(wire), 0,
              size_t(c - fill) * dtypeSize(wire));
}

/// ReduceScatter([gate,] x1..xn): one allToAll of the ranks' chunks (block
/// q of the message holds chunk q of every value), then this rank's chunk
/// reduced by reduceRange, element by element in rank order, as AllReduce
/// reduces it: the same bits as the AllReduce's output there.
void kernelReduceScatter(KernelContext &ctx) {
  const Node &node = ctx.node;
  const size_t first =
      allReduceFirstValue(node, ctx.inputs.size(), ctx.outputs.size());
  const Reduction red = allReduceOpOf(node);
  const DType wire = allReduceWireOf(node);
  int rank = 0;
  const int64_t ranks = shardWorld(ctx, rank);
  std::vector<const Tensor *> xs;
  std::vector<DType> wireTypes;
  std::vector<int64_t> chunks;
  std::vector<size_t> offsets;
  size_t block = 0; // one rank's bytes of the message
  for (size_t i = first; i < ctx.inputs.size(); ++i) {
    const Tensor &x = input(ctx, i, "value");
    checkAllReduceType(node, i, x.dtype, red);
    xs.push_back(&x);
    wireTypes.push_back(allReduceWireTypeFor(x.dtype, wire));
    chunks.push_back(shardChunk(x.numel(), ranks));
    offsets.push_back(block);
    block += alignUp(size_t(chunks.back()) * dtypeSize(wireTypes.back()));
  }
  const bool open = gateIsOpen(ctx, first);
  if (ranks == 1 || !open) { // this rank's own chunk, as it is
    for (size_t i = 0; i < xs.size(); ++i) {
      const Tensor &x = *xs[i];
      copyChunk(x, chunks[i], rank, ctx.out(i, x.dtype, {chunks[i]}));
    }
    return;
  }
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < block * size_t(ranks))
    buffer.resize(block * size_t(ranks));
  uint8_t *message = buffer.data();
  std::memset(message, 0, block * size_t(ranks)); // the gaps travel too
  for (int64_t q = 0; q < ranks; ++q)
    for (size_t i = 0; i < xs.size(); ++i)
      chunkToWire(node, *xs[i], chunks[i], q, wireTypes[i],
                  message + size_t(q) * block + offsets[i]);
  // Block q becomes rank q's chunk for this rank; reduced into block 0.
  ctx.collective->allToAll(message, block, message);
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<const uint8_t *> srcs;
    for (int64_t q = 0; q < ranks; ++q)
      srcs.push_back(message + size_t(q) * block + offsets[i]);
    reduceRange(wireTypes[i], srcs, message + offsets[i], chunks[i], red);
    const Tensor &x = *xs[i];
    fromWire(node, message + offsets[i], wireTypes[i],
             ctx.out(i, x.dtype, {chunks[i]}));
  }
}

/// RankShard(x1..xn): this rank's chunk of each value (no communication).
void kernelRankShard(KernelContext &ctx) {
  int rank = 0;
  const int64_t ranks = shardWorld(ctx, rank);
  if (ctx.inputs.size() != ctx.outputs.size() || ctx.inputs.empty())
    fail(ctx.node, "has ", ctx.inputs.size(), " inputs but ",
         ctx.outputs.size(), " outputs (one chunk per value)");
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor &x = input(ctx, i, "value");
    const int64_t c = shardChunk(x.numel(), ranks);
    copyChunk(x, c, rank, ctx.out(i, x.dtype, {c}));
  }
}

/// AllGather(s1..sn, like1..liken), or AllGather(s1..sn) <shapes> (a
/// sharded master's): every rank's chunks, one allGather of this rank's
/// block, the padding dropped.
void kernelAllGather(KernelContext &ctx) {
  const Node &node = ctx.node;
  int rank = 0;
  const int64_t ranks = shardWorld(ctx, rank);
  const size_t n = ctx.outputs.size();
  const std::vector<std::vector<int64_t>> shapes = allGatherShapes(node, n);
  const size_t inputs = shapes.empty() ? 2 * n : n;
  if (n == 0 || ctx.inputs.size() != inputs)
    fail(node, "has ", ctx.inputs.size(), " inputs and ", ctx.outputs.size(),
         " outputs (expected n chunks, n values they are chunks of or the "
         "shapes attribute, n outputs)");
  std::vector<int64_t> chunks, numels;
  std::vector<size_t> offsets;
  std::vector<DType> types;
  std::vector<std::vector<int64_t>> dims;
  size_t block = 0;
  for (size_t i = 0; i < n; ++i) {
    const Tensor &s = input(ctx, i, "chunk");
    const Tensor *like = shapes.empty() ? &input(ctx, n + i, "like") : nullptr;
    const std::vector<int64_t> whole = like ? like->dims : shapes[i];
    const DType type = like ? like->dtype : s.dtype;
    int64_t numel = 1;
    for (int64_t d : whole)
      numel *= d;
    const int64_t c = shardChunk(numel, ranks);
    if (s.dtype != type || s.numel() != c)
      fail(node, "chunk ", i, " is ", dtypeName(s.dtype), " ",
           shapeString(s.dims), " but a chunk of ", dtypeName(type), " ",
           shapeString(whole), " over ", ranks, " ranks is ", dtypeName(type),
           " [", c, "]");
    chunks.push_back(c);
    numels.push_back(numel);
    types.push_back(type);
    dims.push_back(whole);
    offsets.push_back(block);
    block += alignUp(size_t(c) * dtypeSize(type));
  }
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < block * size_t(ranks))
    buffer.resize(block * size_t(ranks));
  uint8_t *message = buffer.data();
  uint8_t *mine = message + size_t(rank) * block;
  std::memset(mine, 0, block);
  for (size_t i = 0; i < n; ++i) {
    const Tensor &s = ctx.in(i);
    if (s.byteSize())
      std::memcpy(mine + offsets[i], s.bytes.data(), s.byteSize());
  }
  if (ranks > 1)
    ctx.collective->allGather(mine, block, message);
  // The outputs only now: one may lie over a chunk or a `like` input.
  for (size_t i = 0; i < n; ++i) {
    Tensor &y = ctx.out(i, types[i], dims[i]);
    const size_t size = dtypeSize(types[i]);
    for (int64_t q = 0; q < ranks; ++q) {
      const int64_t fill = chunkFill(numels[i], chunks[i], q);
      if (fill)
        std::memcpy(y.bytes.data() + size_t(q * chunks[i]) * size,
                    message + size_t(q) * block + offsets[i],
                    size_t(fill) * size);
    }
  }
}

/// ShardedClipGradNorm(s1..sn): ClipGradNorm's norm of the whole gradients
/// from their chunks. The unsharded kernel adds each gradient's squares in
/// fp32 in element order; here rank q continues rank q-1's partial sums
/// (one allGather of the n partials per rank), so each gradient's sum is
/// the same sequence of fp32 additions (the padding adds +0, which changes
/// no sum), and so are the norm and the coefficient.
void kernelShardedClipGradNorm(KernelContext &ctx) {
  const Node &node = ctx.node;
  int rank = 0;
  const int64_t ranks = shardWorld(ctx, rank);
  const size_t n = ctx.inputs.size();
  if (n == 0 || ctx.outputs.size() != n + 1)
    fail(node, "has ", n, " inputs but ", ctx.outputs.size(),
         " outputs (expected one per gradient chunk and the norm)");
  std::vector<float> partial(n, 0.0f), all(n * size_t(ranks));
  for (int64_t q = 0; q < ranks; ++q) {
    if (q == rank)
      for (size_t i = 0; i < n; ++i) {
        const Tensor &s = input(ctx, i, "gradient chunk");
        float sq = partial[i];
        if (s.dtype == DType::F32) {
          const float *p = s.data<float>();
          for (int64_t k = 0, e = s.numel(); k < e; ++k)
            sq += p[k] * p[k];
        } else if (s.dtype == DType::F64) {
          const double *p = s.data<double>();
          for (int64_t k = 0, e = s.numel(); k < e; ++k) {
            float v = float(p[k]);
            sq += v * v;
          }
        } else {
          fail(node, "gradient chunk ", i, " is ", dtypeName(s.dtype),
               "; the sharded clip takes fp32 or fp64 master gradients");
        }
        partial[i] = sq;
      }
    if (ranks > 1) { // rank q's partials to every rank
      ctx.collective->allGather(partial.data(), n * sizeof(float), all.data());
      std::copy(all.begin() + ptrdiff_t(size_t(q) * n),
                all.begin() + ptrdiff_t(size_t(q + 1) * n), partial.begin());
    }
  }
  float sumOfNormSquares = 0;
  for (size_t i = 0; i < n; ++i)
    clipAddTensorNorm(sumOfNormSquares, partial[i]);
  float total = std::sqrt(sumOfNormSquares);
  float coef = clipGradNormCoefficient(total, node.attrFloat("max_norm", 1.0f));
  for (size_t i = 0; i < n; ++i) {
    const Tensor &s = ctx.in(i);
    Tensor *out = optionalOutput(ctx, i, s.dtype, s.dims);
    if (!out)
      continue;
    if (s.dtype == DType::F32) {
      const float *p = s.data<float>();
      float *o = out->data<float>();
      for (int64_t k = 0, e = s.numel(); k < e; ++k)
        o[k] = p[k] * coef;
    } else {
      const double *p = s.data<double>();
      double *o = out->data<double>();
      for (int64_t k = 0, e = s.numel(); k < e; ++k)
        o[k] = p[k] * double(coef);
    }
  }
  output(ctx, n, DType::F32, {}).data<float>()[0] = total;
}

} // namespace

std::vector<KernelEntry> collectiveKernels() {
  return {
      {kMpcDomain, "AllReduce", kernelAllReduce},
      {kMpcDomain, "ReduceScatter", kernelReduceScatter},
      {kMpcDomain, "RankShard", kernelRankShard},
      {kMpcDomain, "AllGather", kernelAllGather},
      {kMpcDomain, "ShardedClipGradNorm", kernelShardedClipGradNorm},
  };
}

} // namespace cpu
} // namespace mpc
