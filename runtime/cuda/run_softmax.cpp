// CUDA runners of Softmax, LogSoftmax and their mpc gradients.
//
// The axis is resolved as the CPU kernels resolve it (opset-13 rule,
// default -1, kernels/cpu/softmax.cpp); the rows go to kernels/cuda/
// softmax.cu with each operand's dtype.
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/softmax.h"
#include "passes/ir/mpc_ops.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

namespace mpc {
namespace cuda {
namespace {

AxisRows axisRows(const Node &node, const std::vector<int64_t> &dims) {
  int64_t axis =
      cpu::normalizeAxis(node, node.attrInt("axis", -1), int64_t(dims.size()));
  cpu::AxisSplit s = cpu::splitAt(dims, axis);
  return {s.outer, s.len, s.inner};
}

template <bool Log> void runSoftmax(NodeStaging &s) {
  const Tensor &x = s.in(0, "input");
  requireDeviceFloat(s.node(), x, "input");
  AxisRows rows = axisRows(s.node(), x.dims);
  void *y = s.out(0, x.dtype, x.dims);
  launchSoftmax(Log, x.dtype, s.device(0), y, rows, s.stream());
}

template <bool Log> void runSoftmaxGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &y = s.in(1, "Y");
  if (dy.dims != y.dims)
    cpu::fail(node, "dY of shape ", cpu::shapeString(dy.dims),
              " does not match Y of shape ", cpu::shapeString(y.dims));
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, y, "Y");
  AxisRows rows = axisRows(node, dy.dims);
  void *dx = s.out(0, dy.dtype, dy.dims);
  launchSoftmaxGrad(Log, dy.dtype, s.device(0), y.dtype, s.device(1), dx, rows,
                    s.stream());
}

std::string checkInput0(const Node &n) { return requireDeviceFloat(n, {0}); }
std::string checkInputs01(const Node &n) {
  return requireDeviceFloat(n, {0, 1});
}

} // namespace

std::vector<CudaOpEntry> softmaxOps() {
  return {
      {"", "Softmax", runSoftmax<false>, checkInput0},
      {"", "LogSoftmax", runSoftmax<true>, checkInput0},
      {kMpcDomain, "SoftmaxGrad", runSoftmaxGrad<false>, checkInputs01},
      {kMpcDomain, "LogSoftmaxGrad", runSoftmaxGrad<true>, checkInputs01},
  };
}

} // namespace cuda
} // namespace mpc
