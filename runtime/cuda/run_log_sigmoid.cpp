// CUDA runners of mpc.LogSigmoid and mpc.LogSigmoidGrad (fuse-log-sigmoid's
// op and its gradient), validated with the CPU kernels' rules and messages
// (kernels/cpu/log_sigmoid.cpp).
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/log_sigmoid.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

void runLogSigmoid(NodeStaging &s) {
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(s.node(), x, "X");
  void *y = s.out(0, x.dtype, x.dims);
  launchLogSigmoid(x.dtype, s.device(0), y, x.numel(), s.stream());
}

void runLogSigmoidGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  if (dy.dims != x.dims)
    fail(node, "dY of shape ", cpu::shapeString(dy.dims),
         " does not match X of shape ", cpu::shapeString(x.dims));
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  void *dx = s.out(0, dy.dtype, dy.dims);
  launchLogSigmoidGrad(dy.dtype, s.device(0), x.dtype, s.device(1), dx,
                       dy.numel(), s.stream());
}

} // namespace

std::vector<CudaOpEntry> logSigmoidOps() {
  return {
      {kMpcDomain, "LogSigmoid", runLogSigmoid,
       [](const Node &n) { return requireDeviceFloat(n, {0}); }},
      {kMpcDomain, "LogSigmoidGrad", runLogSigmoidGrad,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1});
       }},
  };
}

} // namespace cuda
} // namespace mpc
