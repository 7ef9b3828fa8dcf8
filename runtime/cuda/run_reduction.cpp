// CUDA runners of ReduceSum, ReduceMean, ReduceMax, mpc.ReduceGrad and
// mpc.ReduceExtremumGrad, and of CumSum (kernels/cuda/cumsum.h).
//
// The reduced axes come from the CPU backend's own reducedAxes (axes input
// or attribute, noop_with_empty_axes), so both backends reduce the same
// axes; the kernels walk each output's inputs in the CPU's order.
//
// mpc.SumToShape and mpc.SumToShapeAs (the gradient of a broadcast) sum dY
// to X's shape with the same kernels (kernels/cuda/reduce.h).
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/cumsum.h"
#include "kernels/cuda/reduce.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_broadcast.h"
#include "runtime/cuda/node_staging.h"

#include <stdexcept>

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

/// X's dims with 1 on the reduced axes, and the output's dims (keepdims).
struct ReducedShape {
  std::vector<int64_t> kept, out;
  int64_t count = 1; ///< elements reduced into each output
};

ReducedShape reducedShape(NodeStaging &s, size_t axesInput,
                          const std::vector<int64_t> &dims) {
  int64_t rank = int64_t(dims.size());
  if (rank > kMaxKernelRank)
    cpu::fail(s.node(), "rank ", rank, " is above the cuda kernels' limit of ",
              kMaxKernelRank);
  std::vector<bool> reduced = cpu::reducedAxes(s.ctx(), axesInput, rank);
  bool keepDims = s.node().attrInt("keepdims", 1) != 0;
  ReducedShape r;
  r.kept = dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[size_t(d)]) {
      r.kept[size_t(d)] = 1;
      r.count *= dims[size_t(d)];
    }
    if (keepDims || !reduced[size_t(d)])
      r.out.push_back(r.kept[size_t(d)]);
  }
  return r;
}

template <ReduceKind K> void runReduce(NodeStaging &s) {
  const Tensor &x = s.in(0, "data");
  requireDeviceFloat(s.node(), x, "data");
  ReducedShape r = reducedShape(s, 1, x.dims);
  void *y = s.out(0, x.dtype, r.out);
  launchReduce(K, x.dtype, s.device(0), y,
               makeSumToShapeGeometry(x.dims, r.kept), s.stream());
}

void runReduceGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  requireDeviceFloat(node, dy, "dY");
  ReducedShape r = reducedShape(s, 2, x.dims);
  if (dy.dims != r.out)
    cpu::fail(node, "dY of shape ", cpu::shapeString(dy.dims),
              " is not the reduction of X of shape ", cpu::shapeString(x.dims),
              " (expects ", cpu::shapeString(r.out), ")");
  void *dx = s.out(0, dy.dtype, x.dims);
  const std::vector<int64_t> from[1] = {r.kept};
  launchReduceGrad(dy.dtype, s.device(0), dx,
                   makeBroadcastGeometry<1>(x.dims, from),
                   node.attrInt("mean", 0) != 0, r.count, s.stream());
}

/// ReduceExtremumGrad(dY, X, Y [, axes]): dY split evenly among the
/// elements of X equal to their group's Y (the CPU kernel's ties rule).
void runReduceExtremumGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X"), &y = s.in(2, "Y");
  ReducedShape r = reducedShape(s, 3, x.dims);
  if (dy.dims != r.out || y.dims != r.out)
    cpu::fail(node, "dY ", cpu::shapeString(dy.dims), " and Y ",
              cpu::shapeString(y.dims), " must have the reduced shape ",
              cpu::shapeString(r.out), " of X ", cpu::shapeString(x.dims));
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  requireDeviceFloat(node, y, "Y");
  void *dx = s.out(0, dy.dtype, x.dims);
  launchReduceExtremumGrad(dy.dtype, s.device(0), x.dtype, s.device(1), y.dtype,
                           s.device(2), dx,
                           makeSumToShapeGeometry(x.dims, r.kept), s.stream());
}

/// CumSum(x, axis): the axis is read on the host.
void runCumSum(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "x");
  if (x.dims.empty())
    cpu::fail(node, "x must have rank >= 1");
  std::vector<int64_t> axis =
      cpu::readInts(node, s.hostValue(1, "axis"), "axis");
  if (axis.size() != 1)
    cpu::fail(node, "axis must be a scalar, got ", axis.size(), " values");
  int64_t a = cpu::normalizeAxis(node, axis[0], int64_t(x.dims.size()));
  if (!cumsumSupported(x.dtype))
    cpu::fail(node,
              "the cuda backend sums fp32, fp16, bf16, int64 or int32, "
              "not ",
              dtypeName(x.dtype));
  cpu::AxisSplit split = cpu::splitAt(x.dims, a);
  void *y = s.out(0, x.dtype, x.dims);
  launchCumSum(x.dtype, s.device(0), y, split.outer, split.len, split.inner,
               node.attrInt("exclusive", 0) != 0,
               node.attrInt("reverse", 0) != 0, s.stream());
}

std::string checkCumSum(const Node &n) {
  const Value *x = n.input(0);
  if (!x || x->dtype == DType::Undefined || cumsumSupported(x->dtype))
    return "";
  return std::string("it sums fp32, fp16, bf16, int64 or int32, not ") +
         dtypeName(x->dtype);
}

std::string checkReduce(const Node &n) { return requireDeviceFloat(n, {0}); }

/// The geometry of summing dY to X's shape, after the checks both sums share.
SumToShapeGeometry sumToShapeGeometry(const Node &node, const Tensor &dy,
                                      const Tensor &x) {
  if (x.dims.size() > dy.dims.size() ||
      cpu::broadcastShapes(node, x.dims, dy.dims) != dy.dims)
    fail(node, "shape ", cpu::shapeString(x.dims), " does not broadcast to dY ",
         cpu::shapeString(dy.dims));
  requireDeviceFloat(node, dy, "dY");
  if (dy.dims.size() > size_t(kMaxKernelRank))
    fail(node, "rank ", dy.dims.size(), " is above the cuda kernels' limit of ",
         kMaxKernelRank);
  return makeSumToShapeGeometry(dy.dims, x.dims);
}

void runSumToShape(NodeStaging &s) {
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  SumToShapeGeometry g = sumToShapeGeometry(s.node(), dy, x);
  void *dx = s.out(0, dy.dtype, x.dims);
  launchSumToShape(dy.dtype, s.device(0), dx, g,
                   s.scratch(sumToShapeScratchBytes(g)), s.stream());
}

/// mpc.SumToShapeAs: the sum written in X's (wider) dtype.
void runSumToShapeAs(NodeStaging &s) {
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  SumToShapeGeometry g = sumToShapeGeometry(s.node(), dy, x);
  requireDeviceFloat(s.node(), x, "X");
  void *dx = s.out(0, x.dtype, x.dims);
  launchSumToShapeAs(dy.dtype, s.device(0), x.dtype, dx, g,
                     s.scratch(sumToShapeScratchBytes(g)), s.stream());
}

} // namespace

std::vector<CudaOpEntry> reductionOps() {
  return {
      // The axes input (1; 2 for ReduceGrad, 3 for ReduceExtremumGrad) is
      // read on the host.
      {"", "ReduceSum", runReduce<ReduceKind::Sum>, checkReduce, 1u << 1},
      {"", "ReduceMean", runReduce<ReduceKind::Mean>, checkReduce, 1u << 1},
      {"", "ReduceMax", runReduce<ReduceKind::Max>, checkReduce, 1u << 1},
      {"", "CumSum", runCumSum, checkCumSum, 1u << 1},
      {kMpcDomain, "ReduceGrad", runReduceGrad, checkReduce, 1u << 2},
      {kMpcDomain, "ReduceExtremumGrad", runReduceExtremumGrad,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1, 2});
       },
       1u << 3},
      {kMpcDomain, "SumToShape", runSumToShape,
       [](const Node &n) { return requireDeviceFloat(n, {0}); }},
      {kMpcDomain, "SumToShapeAs", runSumToShapeAs,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1});
       }},
  };
}

} // namespace cuda
} // namespace mpc
