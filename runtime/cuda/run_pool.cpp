// CUDA runners of the pooling family: MaxPool (with Indices), AveragePool,
// GlobalAveragePool, mpc.MaxPoolGrad and mpc.AveragePoolGrad, 1 to 3
// spatial dims.
//
// The window comes from the same resolver as the CPU kernels'
// (ir/window_geometry.h), with their checks and messages
// (kernels/cpu/pool.cpp), and runs on mpc's own kernels (kernels/cuda/
// pool.h says why not cuDNN's pooling): the outputs are the CPU's bits.
// AveragePoolGrad's x_shape is a shape (int64, made by a host-run Shape or
// Constant) and is read on the host, as Reshape's shape is.
#include "ir/mpc_ops.h"
#include "kernels/cpu/conv_util.h"
#include "kernels/cuda/pool.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;
using cpu::shapeString;

/// The pooling window of `node` over an input of `xdims`, padded in front
/// to kMaxPoolRank spatial dims.
PoolWindow poolWindow(const Node &node, const std::vector<int64_t> &xdims) {
  if (xdims.size() < 3)
    fail(node, "X must have rank >= 3 ([N, C, D1, ...]), got shape ",
         shapeString(xdims));
  size_t r = xdims.size() - 2;
  if (r > size_t(kMaxPoolRank))
    fail(node, "the cuda backend pools over 1 to ", kMaxPoolRank,
         " spatial dims, got ", r);
  WindowAttrs a = readWindowAttrs(node, WindowKind::Pool, r);
  WindowGeometry g = resolveWindow(node, a, cpu::spatialDims(xdims));
  PoolWindow w = makePoolWindow(g, xdims[0] * xdims[1]);
  w.countIncludePad = node.attrInt("count_include_pad", 0) != 0;
  return w;
}

std::vector<int64_t> outputDims(const std::vector<int64_t> &xdims,
                                const PoolWindow &w) {
  std::vector<int64_t> dims = {xdims[0], xdims[1]};
  for (int d = kMaxPoolRank - w.rank; d < kMaxPoolRank; ++d)
    dims.push_back(w.out[d]);
  return dims;
}

void runMaxPool(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(node, x, "X");
  PoolWindow w = poolWindow(node, x.dims);
  int64_t order = node.attrInt("storage_order", 0);
  if (order != 0 && order != 1)
    fail(node, "attribute 'storage_order' must be 0 or 1, got ", order);
  w.storageOrder = int(order);
  std::vector<int64_t> dims = outputDims(x.dims, w);
  void *y = s.out(0, x.dtype, dims);
  auto *indices = static_cast<int64_t *>(s.optionalOut(1, DType::I64, dims));
  launchMaxPool(x.dtype, s.device(0), y, indices, w, s.stream());
}

void runMaxPoolGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  PoolWindow w = poolWindow(node, x.dims);
  if (dy.dims != outputDims(x.dims, w))
    fail(node, "dY of shape ", shapeString(dy.dims),
         " is not MaxPool's output for X of shape ", shapeString(x.dims));
  void *dx = s.out(0, dy.dtype, x.dims);
  auto *argmax = static_cast<int64_t *>(
      s.scratch(size_t(w.planes * w.outCount) * sizeof(int64_t)));
  launchMaxPoolGrad(dy.dtype, s.device(0), x.dtype, s.device(1), dx, argmax, w,
                    s.stream());
}

void runAveragePool(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(node, x, "X");
  PoolWindow w = poolWindow(node, x.dims);
  void *y = s.out(0, x.dtype, outputDims(x.dims, w));
  launchAveragePool(x.dtype, s.device(0), y, w, s.stream());
}

void runAveragePoolGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY");
  requireDeviceFloat(node, dy, "dY");
  std::vector<int64_t> xs = cpu::readInts(node, s.in(1, "x_shape"), "x_shape");
  cpu::checkedCount(node, xs);
  PoolWindow w = poolWindow(node, xs);
  if (dy.dims != outputDims(xs, w))
    fail(node, "dY of shape ", shapeString(dy.dims),
         " is not AveragePool's output for x_shape ", shapeString(xs));
  void *dx = s.out(0, dy.dtype, xs);
  launchAveragePoolGrad(dy.dtype, s.device(0), dx, w, s.stream());
}

void runGlobalAveragePool(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(node, x, "X");
  cpu::requireWindowRank(node, x, "X");
  std::vector<int64_t> dims = x.dims;
  int64_t size = 1;
  for (size_t d = 2; d < dims.size(); ++d) {
    size *= dims[d];
    dims[d] = 1;
  }
  void *y = s.out(0, x.dtype, dims);
  launchGlobalAveragePool(x.dtype, s.device(0), y, x.dims[0] * x.dims[1], size,
                          s.stream());
}

/// "" unless input 0 has a known rank with more spatial dims than the
/// kernels take.
std::string checkPoolRank(const Node &node) {
  const Value *v = node.numInputs() ? node.input(0) : nullptr;
  if (v && v->hasShape && v->dims.size() > size_t(kMaxPoolRank) + 2)
    return "the pooling kernels take 1 to 3 spatial dims, input 0 has " +
           std::to_string(v->dims.size() - 2);
  return "";
}

std::string checkPool(const Node &n) {
  std::string why = requireDeviceFloat(n, {0});
  return why.empty() ? checkPoolRank(n) : why;
}

std::string checkMaxPoolGrad(const Node &n) {
  std::string why = requireDeviceFloat(n, {0, 1});
  return why.empty() ? checkPoolRank(n) : why;
}

} // namespace

std::vector<CudaOpEntry> poolOps() {
  return {
      {"", "MaxPool", runMaxPool, checkPool},
      {"", "AveragePool", runAveragePool, checkPool},
      {"", "GlobalAveragePool", runGlobalAveragePool,
       [](const Node &n) { return requireDeviceFloat(n, {0}); }},
      {kMpcDomain, "MaxPoolGrad", runMaxPoolGrad, checkMaxPoolGrad},
      {kMpcDomain, "AveragePoolGrad", runAveragePoolGrad,
       [](const Node &n) { return requireDeviceFloat(n, {0}); }},
  };
}

} // namespace cuda
} // namespace mpc
