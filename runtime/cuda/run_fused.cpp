// CUDA runners of the fused ops the fusion passes emit: mpc.Gelu and
// mpc.GeluTanh (Gelu's runner), mpc.FusedMatMul (MatMul's, with its
// transA/transB), and the softmax forms with a widening cast or a
// one-element divisor folded in, mpc.SoftmaxTo, mpc.DivSoftmaxTo,
// mpc.SoftmaxGradAs (SoftmaxGrad's runner, dX in Y's dtype) and
// mpc.SoftmaxGradDiv, and mpc.AddTo (an add with its casts folded in). The
// runners they share with their unfused ops are named in shared_runners.h;
// semantics in ir/mpc_ops.h.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/add_to.h"
#include "kernels/cuda/softmax.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"
#include "runtime/cuda/shared_runners.h"

#include <optional>

namespace mpc {
namespace cuda {
namespace {

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

/// mpc.AddTo: A + B read as stored, added in fp32, C in `to`, Clow (when
/// asked for) C cast to fp16 or bf16.
void runAddTo(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &a = s.in(0, "A"), &b = s.in(1, "B");
  requireDeviceFloat(node, a, "A");
  requireDeviceFloat(node, b, "B");
  if (a.dims != b.dims)
    cpu::fail(node, "A of shape ", cpu::shapeString(a.dims), " and B of shape ",
              cpu::shapeString(b.dims), " must have the same shape");
  const DType to = cpu::floatTypeAttr(node, "to", DType::F32);
  void *c = s.out(0, to, a.dims);
  const DType low = lowType(node);
  void *clow = s.optionalOut(1, low, a.dims);
  launchAddTo(a.dtype, s.device(0), b.dtype, s.device(1), to, c, low, clow,
              a.numel(), s.stream());
}

std::string checkAddTo(const Node &n) {
  std::string why = requireDeviceFloat(n, {0, 1});
  if (!why.empty())
    return why;
  std::optional<DType> to = fromOnnxDataType(int(n.attrInt("to", 0)));
  if (!to || (*to != DType::F32 && *to != DType::F16 && *to != DType::BF16))
    return "the cuda kernel writes C in fp32, fp16 or bf16";
  DType low = lowType(n);
  if (n.numOutputs() > 1 && n.output(1) && low != DType::F16 &&
      low != DType::BF16)
    return "the cuda kernel writes Clow in fp16 or bf16";
  return "";
}

} // namespace

std::vector<CudaOpEntry> fusedOps() {
  return {
      {kMpcDomain, "Gelu", runGelu, checkInput0},     // fuse-gelu, opset < 20
      {kMpcDomain, "GeluTanh", runGelu, checkInput0}, // (cpu::geluTanh)
      {kMpcDomain, "FusedMatMul", runMatMul, checkGemm},
      {kMpcDomain, "SoftmaxGradAs", runSoftmaxGrad<false, true>, checkInputs01},
      {kMpcDomain, "SoftmaxGradDiv", runSoftmaxGradDiv, checkSoftmaxGradDiv},
      {kMpcDomain, "SoftmaxTo", runSoftmaxTo<false>, checkSoftmaxTo},
      {kMpcDomain, "AddTo", runAddTo, checkAddTo},
      {kMpcDomain, "DivSoftmaxTo", runSoftmaxTo<true>, checkSoftmaxTo},
  };
}

} // namespace cuda
} // namespace mpc
