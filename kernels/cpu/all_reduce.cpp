// mpc.AllReduce on the CPU: combines each input across the ranks of the
// data-parallel world (runtime/collective.h) in rank order.
//
// AllReduce(x1..xn) <reduction = "mean" | "sum" | "max"> -> (y1..yn)
// (passes/ir/mpc_ops.h). The inputs travel as one message: every rank
// gathers every rank's bytes of all n inputs, then reduces them itself, in
// rank order (floating point: a double sum of the ranks' values, divided by
// the number of ranks for "mean", rounded once to the value's type; "max" of
// bool is OR, of floating point NaN-propagating). Every rank thus holds the
// same bits, and a world of one rank copies its inputs.
#include "kernels/common/all_reduce_rule.h"
#include "kernels/cpu/cpu_util.h"
#include "passes/ir/mpc_ops.h"

#include <cmath>

namespace mpc {
namespace cpu {
namespace {

using Reduction = AllReduceOp;

/// y = the reduction over ranks of x, whose bytes rank r holds at
/// gathered + r * stride + offset.
void reduceOne(const Tensor &x, Tensor &y, Reduction red,
               const uint8_t *gathered, size_t stride, size_t offset,
               int ranks) {
  const int64_t n = x.numel();
  Tensor rankValue(x.dtype, x.dims);
  // The ranks' tensors, viewed one at a time through rankValue's bytes.
  auto load = [&](int r) {
    std::memcpy(rankValue.bytes.data(), gathered + size_t(r) * stride + offset,
                x.byteSize());
  };
  if (x.dtype == DType::F32 && red != Reduction::Max) {
    std::vector<double> acc(size_t(n), 0.0);
    for (int r = 0; r < ranks; ++r) {
      const float *p = reinterpret_cast<const float *>(
          gathered + size_t(r) * stride + offset);
      for (int64_t i = 0; i < n; ++i)
        acc[size_t(i)] += double(p[i]);
    }
    float *out = reinterpret_cast<float *>(y.bytes.data());
    const double divisor = red == Reduction::Mean ? double(ranks) : 1.0;
    for (int64_t i = 0; i < n; ++i)
      out[i] = float(acc[size_t(i)] / divisor);
    return;
  }
  std::vector<double> acc(size_t(n), 0.0);
  for (int r = 0; r < ranks; ++r) {
    load(r);
    for (int64_t i = 0; i < n; ++i) {
      double v = rankValue.getAsDouble(i);
      double &a = acc[size_t(i)];
      if (red != Reduction::Max)
        a += v;
      else if (r == 0 || std::isnan(v) || (!std::isnan(a) && v > a))
        a = v;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    y.setFromDouble(i, red == Reduction::Mean ? acc[size_t(i)] / double(ranks)
                                              : acc[size_t(i)]);
}

void kernelAllReduce(KernelContext &ctx) {
  const Node &node = ctx.node;
  if (ctx.outputs.size() != ctx.inputs.size())
    fail(node, "has ", ctx.inputs.size(), " inputs but ", ctx.outputs.size(),
         " outputs (one per input)");
  const Reduction red = allReduceOpOf(node);
  size_t total = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor &x = input(ctx, i, "value");
    checkAllReduceType(node, i, x.dtype, red);
    total += x.byteSize();
  }
  Collective *world = ctx.collective;
  const int ranks = world ? world->size() : 1;
  if (ranks == 1) {
    for (size_t i = 0; i < ctx.inputs.size(); ++i) {
      const Tensor &x = ctx.in(i);
      Tensor &y = ctx.out(i, x.dtype, x.dims);
      if (y.bytes.data() != x.bytes.data() && x.byteSize())
        std::memcpy(y.bytes.data(), x.bytes.data(), x.byteSize());
    }
    return;
  }
  // One message: the inputs' bytes back to back.
  std::vector<uint8_t> send(total), gathered(total * size_t(ranks));
  size_t offset = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor &x = ctx.in(i);
    if (x.byteSize())
      std::memcpy(send.data() + offset, x.bytes.data(), x.byteSize());
    offset += x.byteSize();
  }
  world->allGather(send.data(), total, gathered.data());
  offset = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor &x = ctx.in(i);
    Tensor &y = ctx.out(i, x.dtype, x.dims);
    reduceOne(x, y, red, gathered.data(), total, offset, ranks);
    offset += x.byteSize();
  }
}

} // namespace

std::vector<KernelEntry> allReduceKernels() {
  return {{kMpcDomain, "AllReduce", kernelAllReduce}};
}

} // namespace cpu
} // namespace mpc
