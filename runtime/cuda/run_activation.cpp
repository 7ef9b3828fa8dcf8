// CUDA runners of the activations: Relu, Tanh and Sigmoid (cases of the
// unary-math kernel, shared_runners.h), mpc.ReluGrad, LeakyRelu and
// mpc.LeakyReluGrad, Gelu and mpc.GeluGrad, mpc.LogSigmoid and
// mpc.LogSigmoidGrad, Softmax, LogSoftmax and their gradients
// mpc.SoftmaxGrad and mpc.LogSoftmaxGrad.
//
// Operands are validated with the CPU kernels' rules and messages
// (kernels/cpu/elementwise.cpp, kernels/cpu/activation.cpp,
// kernels/cpu/activation.cpp). The softmax axis is resolved as the CPU kernels
// resolve it (opset-13 rule, default -1); the rows go to
// kernels/cuda/softmax.cu with each operand's dtype. runGelu, runGeluGrad,
// axisRows and runSoftmaxGrad are named in shared_runners.h: the fused ops
// (run_fused.cpp) and mpc.ErfGrad (run_elementwise.cpp) run them too.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/leaky_relu.h"
#include "kernels/cuda/log_sigmoid.h"
#include "kernels/cuda/softmax.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"
#include "runtime/cuda/shared_runners.h"

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;
using cpu::geluTanh;

// --- Relu
// --------------------------------------------------------------------------

void runReluGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &y = s.in(1, "Y");
  if (dy.dims != y.dims)
    fail(node, "dY of shape ", cpu::shapeString(dy.dims),
         " does not match Y of shape ", cpu::shapeString(y.dims));
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, y, "Y");
  void *dx = s.out(0, dy.dtype, dy.dims);
  launchReluGrad(dy.dtype, s.device(0), y.dtype, s.device(1), dx, dy.numel(),
                 s.stream());
}

// --- LeakyRelu
// -----------------------------------------------------------------

float leakyAlpha(const Node &node) { return node.attrFloat("alpha", 0.01f); }

void runLeakyRelu(NodeStaging &s) {
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(s.node(), x, "X");
  void *y = s.out(0, x.dtype, x.dims);
  launchLeakyRelu(x.dtype, s.device(0), y, x.numel(), leakyAlpha(s.node()),
                  s.stream());
}

void runLeakyReluGrad(NodeStaging &s) {
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  requireSameShape(s.node(), dy, x);
  requireDeviceFloat(s.node(), dy, "dY");
  requireDeviceFloat(s.node(), x, "X");
  void *dx = s.out(0, dy.dtype, dy.dims);
  launchLeakyReluGrad(dy.dtype, s.device(0), x.dtype, s.device(1), dx,
                      dy.numel(), leakyAlpha(s.node()), s.stream());
}

// --- LogSigmoid
// --------------------------------------------------------------------------

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

// --- Softmax
// --------------------------------------------------------------------------

template <bool Log> void runSoftmax(NodeStaging &s) {
  const Tensor &x = s.in(0, "input");
  requireDeviceFloat(s.node(), x, "input");
  AxisRows rows = axisRows(s.node(), x.dims);
  void *y = s.out(0, x.dtype, x.dims);
  launchSoftmax(Log, x.dtype, s.device(0), x.dtype, y, rows, s.stream());
}

} // namespace

// --- shared with other categories (shared_runners.h)
// --------------------------------------------------------------------------

AxisRows axisRows(const Node &node, const std::vector<int64_t> &dims) {
  int64_t axis =
      cpu::normalizeAxis(node, node.attrInt("axis", -1), int64_t(dims.size()));
  cpu::AxisSplit s = cpu::splitAt(dims, axis);
  return {s.outer, s.len, s.inner};
}

/// SoftmaxGrad / LogSoftmaxGrad (dX in dY's dtype) and SoftmaxGradAs (`AsY`:
/// dX in Y's).
template <bool Log, bool AsY> void runSoftmaxGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &y = s.in(1, "Y");
  if (dy.dims != y.dims)
    cpu::fail(node, "dY of shape ", cpu::shapeString(dy.dims),
              " does not match Y of shape ", cpu::shapeString(y.dims));
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, y, "Y");
  AxisRows rows = axisRows(node, dy.dims);
  if (AsY && dy.dtype != y.dtype && !widensExactly(dy.dtype, y.dtype))
    cpu::fail(node, "Y (", dtypeName(y.dtype),
              ") must be a float type at least as wide as dY (",
              dtypeName(dy.dtype), ")");
  DType outT = AsY ? y.dtype : dy.dtype;
  void *dx = s.out(0, outT, dy.dims);
  launchSoftmaxGrad(Log, dy.dtype, s.device(0), y.dtype, s.device(1), outT, dx,
                    rows, s.stream());
}

// --- GELU
// ------------------------------------------------------------------------

void runGelu(NodeStaging &s) {
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(s.node(), x, "X");
  bool tanhForm = geluTanh(s.node());
  void *y = s.out(0, x.dtype, x.dims);
  launchGelu(x.dtype, s.device(0), y, x.numel(), tanhForm, s.stream());
}

template <GeluGradKind K> void runGeluGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  if (dy.dims != x.dims)
    fail(node, "dY of shape ", cpu::shapeString(dy.dims),
         " does not match X of shape ", cpu::shapeString(x.dims));
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  GeluGradKind kind = K;
  if (K != GeluGradKind::Erf && geluTanh(node))
    kind = GeluGradKind::GeluTanh;
  void *dx = s.out(0, dy.dtype, dy.dims);
  launchGeluGrad(kind, dy.dtype, s.device(0), x.dtype, s.device(1), dx,
                 dy.numel(), s.stream());
}

template void runGeluGrad<GeluGradKind::Erf>(NodeStaging &);
template void runSoftmaxGrad<false, true>(NodeStaging &);

std::vector<CudaOpEntry> activationOps() {
  auto floatInputs = [](const Node &n) { return requireDeviceFloatFrom(n, 0); };
  return {
      {"", "Relu", runUnary<UnaryOp::Relu>, checkUnary},
      {"", "Tanh", runUnary<UnaryOp::Tanh>, checkUnary},
      {"", "Sigmoid", runUnary<UnaryOp::Sigmoid>, checkUnary},
      {kMpcDomain, "ReluGrad", runReluGrad,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1});
       }},
      {"", "LeakyRelu", runLeakyRelu, floatInputs},
      {kMpcDomain, "LeakyReluGrad", runLeakyReluGrad, floatInputs},
      {"", "Gelu", runGelu, checkInput0},
      {kMpcDomain, "GeluGrad", runGeluGrad<GeluGradKind::Gelu>, checkInputs01},
      {kMpcDomain, "LogSigmoid", runLogSigmoid,
       [](const Node &n) { return requireDeviceFloat(n, {0}); }},
      {kMpcDomain, "LogSigmoidGrad", runLogSigmoidGrad,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1});
       }},
      {"", "Softmax", runSoftmax<false>, checkInput0},
      {"", "LogSoftmax", runSoftmax<true>, checkInput0},
      {kMpcDomain, "SoftmaxGrad", runSoftmaxGrad<false>, checkInputs01},
      {kMpcDomain, "LogSoftmaxGrad", runSoftmaxGrad<true>, checkInputs01},
  };
}

} // namespace cuda
} // namespace mpc
