// CUDA runners of Softmax, LogSoftmax, mpc.SoftmaxTo, mpc.DivSoftmaxTo and
// the mpc gradients (SoftmaxGrad, LogSoftmaxGrad, SoftmaxGradAs,
// SoftmaxGradDiv).
//
// The axis is resolved as the CPU kernels resolve it (opset-13 rule,
// default -1, kernels/cpu/softmax.cpp); the rows go to kernels/cuda/
// softmax.cu with each operand's dtype.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/softmax.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

#include <optional>

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
  launchSoftmax(Log, x.dtype, s.device(0), x.dtype, y, rows, s.stream());
}

/// The dtype of SoftmaxTo / DivSoftmaxTo's optional Ylow (`low`, default
/// fp16); Undefined when it is no type.
DType lowType(const Node &n) {
  std::optional<DType> l =
      fromOnnxDataType(int(n.attrInt("low", toOnnxDataType(DType::F16))));
  return l ? *l : DType::Undefined;
}

/// mpc.SoftmaxTo and (`Div`) mpc.DivSoftmaxTo: X read as stored (divided
/// by D), Y in `to` (fp32 on the device), Ylow (when asked for) Y cast to
/// fp16 or bf16.
template <bool Div> void runSoftmaxTo(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(node, x, "X");
  std::optional<DType> to = fromOnnxDataType(int(node.attrInt("to", 0)));
  if (!to || (*to != x.dtype && *to != DType::F32))
    cpu::fail(node, "the cuda kernel writes X's dtype or float, not 'to' = ",
              node.attrInt("to", 0));
  const void *divisor = nullptr;
  if (Div) {
    const Tensor &d = s.in(1, "D");
    if (d.dtype != x.dtype || d.numel() != 1)
      cpu::fail(node, "D must be one element of X's dtype");
    divisor = s.device(1);
  }
  DType low = lowType(node);
  AxisRows rows = axisRows(node, x.dims);
  void *y = s.out(0, *to, x.dims);
  void *ylow = s.optionalOut(1, low, x.dims);
  launchSoftmax(false, x.dtype, s.device(0), *to, y, rows, s.stream(), divisor,
                low, ylow);
}

/// SoftmaxGrad / LogSoftmaxGrad (dX in dY's dtype) and SoftmaxGradAs (`AsY`:
/// dX in Y's).
template <bool Log, bool AsY = false> void runSoftmaxGrad(NodeStaging &s) {
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

/// mpc.SoftmaxGradDiv with an fp32 Y and D (checkSoftmaxGradDiv).
void runSoftmaxGradDiv(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &y = s.in(1, "Y"), &d = s.in(2, "D");
  if (dy.dims != y.dims)
    cpu::fail(node, "dY of shape ", cpu::shapeString(dy.dims),
              " does not match Y of shape ", cpu::shapeString(y.dims));
  requireDeviceFloat(node, dy, "dY");
  if (y.dtype != DType::F32 || d.dtype != DType::F32 || d.numel() != 1)
    cpu::fail(node, "the cuda kernel takes an fp32 Y and a one-element fp32 D");
  std::optional<DType> to = fromOnnxDataType(int(node.attrInt("to", 0)));
  if (!to)
    cpu::fail(node, "attribute 'to' is not a data type");
  AxisRows rows = axisRows(node, dy.dims);
  void *dx = s.out(0, *to, dy.dims);
  launchSoftmaxGradDiv(
      dy.dtype, s.device(0), static_cast<const float *>(s.device(1)),
      static_cast<const float *>(s.device(2)), *to, dx, rows, s.stream());
}

std::string checkInput0(const Node &n) { return requireDeviceFloat(n, {0}); }
std::string checkSoftmaxTo(const Node &n) {
  std::string why = requireDeviceFloat(n, {0});
  if (!why.empty())
    return why;
  std::optional<DType> to = fromOnnxDataType(int(n.attrInt("to", 0)));
  const Value *x = n.input(0);
  if (!to || (x && *to != x->dtype && *to != DType::F32))
    return "the cuda kernel writes X's dtype or float";
  DType low = lowType(n);
  if (n.output(1) &&
      (*to != DType::F32 || (low != DType::F16 && low != DType::BF16)))
    return "the cuda kernel writes Ylow in fp16 or bf16 from an fp32 Y";
  return "";
}
std::string checkSoftmaxGradDiv(const Node &n) {
  std::string why = requireDeviceFloat(n, {0});
  if (!why.empty())
    return why;
  const Value *y = n.input(1), *d = n.input(2);
  if (!y || y->dtype != DType::F32 || !d || d->dtype != DType::F32)
    return "the cuda kernel takes an fp32 Y and D";
  std::optional<DType> to = fromOnnxDataType(int(n.attrInt("to", 0)));
  if (!to || (*to != DType::F32 && *to != DType::F16 && *to != DType::BF16))
    return "the cuda kernel writes fp32, fp16 or bf16";
  return "";
}
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
      {kMpcDomain, "SoftmaxGradAs", runSoftmaxGrad<false, true>, checkInputs01},
      {kMpcDomain, "SoftmaxGradDiv", runSoftmaxGradDiv, checkSoftmaxGradDiv},
      {kMpcDomain, "SoftmaxTo", runSoftmaxTo<false>, checkSoftmaxTo},
      {kMpcDomain, "DivSoftmaxTo", runSoftmaxTo<true>, checkSoftmaxTo},
  };
}

} // namespace cuda
} // namespace mpc
