// CUDA runners of the piecewise family: LeakyRelu, Clip, Max, Min, Sum and
// the gradients mpc emits for them (LeakyReluGrad, ClipGrad, ExtremumGrad).
//
// Operand rules and messages are the CPU kernels' (kernels/cpu/
// transformer.cpp; the shared checks of kernels/cpu/node_geometry.h). Only
// dtypes and shapes are read on the host: Clip's bounds are read by the
// kernel, so a device-resident step runs these nodes whatever computes
// their inputs. Clip, Max, Min and Sum take every numeric dtype the CPU
// kernels take (integers and fp64 too: shape arithmetic a graph keeps);
// LeakyRelu and the gradients take fp32, fp16 and bf16, and their entries
// refuse fp64 (which serves the CPU's float64 gradient checks) saying why.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cuda/piecewise.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

#include <cmath>

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;
using cpu::shapeString;

/// Throws naming the node unless Clip/Max/Min/Sum take t on the device.
void requireNumeric(const Node &node, const Tensor &t, const char *what) {
  if (!piecewiseNumeric(t.dtype))
    fail(node, what,
         " must be numeric (fp32, fp16, bf16, fp64, int64, int32, int8 or "
         "uint8) on the cuda backend, got ",
         dtypeName(t.dtype));
}

/// The entries' check of Clip/Max/Min/Sum: every known input numeric.
std::string checkNumeric(const Node &node) {
  for (size_t i = 0; i < node.numInputs(); ++i) {
    const Value *v = node.input(i);
    if (v && v->dtype != DType::Undefined && !piecewiseNumeric(v->dtype))
      return "its device kernel takes fp32, fp16, bf16, fp64, int64, int32, "
             "int8 or uint8, input " +
             std::to_string(i) + " is " + dtypeName(v->dtype);
  }
  return "";
}

/// Throws naming the node unless dY and X have one shape (unaryGrad's rule).
void requireSameShape(const Node &node, const Tensor &dy, const Tensor &x) {
  if (dy.dims != x.dims)
    fail(node, "dY of shape ", shapeString(dy.dims),
         " does not match X of shape ", shapeString(x.dims));
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

// --- Clip
// ----------------------------------------------------------------------

/// Input `i` as a device bound, else the attribute `attr` (opset 6) when
/// the node has it, else absent.
ClipBound clipBound(NodeStaging &s, size_t i, const char *attr) {
  ClipBound b;
  if (const Tensor *t = s.optionalIn(i)) {
    b.element = s.device(i);
    b.dtype = t->dtype;
    b.present = true;
  } else if (s.node().hasAttr(attr)) {
    b.value = s.node().attrFloat(attr, 0);
    b.present = true;
  }
  return b;
}

void runClip(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "input");
  for (const Tensor *b : {s.optionalIn(1), s.optionalIn(2)})
    if (b && (b->numel() != 1 || b->dtype != x.dtype))
      fail(node, "min and max must be single elements of the input's type ",
           dtypeName(x.dtype), ", got ", dtypeName(b->dtype), " ",
           shapeString(b->dims));
  requireNumeric(node, x, "input");
  void *y = s.out(0, x.dtype, x.dims);
  launchClip(x.dtype, s.device(0), y, x.numel(), clipBound(s, 1, "min"),
             clipBound(s, 2, "max"), s.stream());
}

void runClipGrad(NodeStaging &s) {
  const Node &node = s.node();
  for (const Tensor *b : {s.optionalIn(2), s.optionalIn(3)})
    if (b && (b->numel() != 1 || !isFloating(b->dtype)))
      fail(node, "min and max must be single floating-point elements, got ",
           dtypeName(b->dtype), " ", shapeString(b->dims));
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  requireSameShape(node, dy, x);
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  for (size_t i : {2, 3})
    if (const Tensor *b = s.optionalIn(i))
      requireDeviceFloat(node, *b, i == 2 ? "min" : "max");
  void *dx = s.out(0, dy.dtype, dy.dims);
  launchClipGrad(dy.dtype, s.device(0), x.dtype, s.device(1), dx, dy.numel(),
                 clipBound(s, 2, "min"), clipBound(s, 3, "max"), s.stream());
}

// --- Max, Min, Sum and ExtremumGrad
// ----------------------------------------------------

/// Inputs first.. of the node as a device table of operands broadcast to
/// `out`.
const VariadicOperand *operandTable(NodeStaging &s, size_t first,
                                    const std::vector<int64_t> &out) {
  if (out.size() > size_t(kMaxKernelRank))
    fail(s.node(), "rank ", out.size(), " is above the cuda kernels' limit of ",
         kMaxKernelRank);
  std::vector<VariadicOperand> ops;
  for (size_t k = first; k < s.ctx().inputs.size(); ++k) {
    const Tensor &t = s.in(k, "data");
    ops.push_back(variadicOperand(s.device(k), t.dtype, t.dims, out));
  }
  return s.upload(ops);
}

template <VariadicFold F> void runVariadic(NodeStaging &s) {
  std::vector<int64_t> dims = cpu::variadicShape(s.ctx());
  DType t = s.in(0, "data_0").dtype;
  requireNumeric(s.node(), s.in(0, "data_0"), "data_0");
  const VariadicOperand *ops = operandTable(s, 0, dims);
  void *y = s.out(0, t, dims);
  launchVariadic(F, t, ops, int(s.ctx().inputs.size()), y,
                 makeVariadicShape(dims), s.stream());
}

void runExtremumGrad(NodeStaging &s) {
  const Node &node = s.node();
  int64_t index = cpu::extremumGradIndex(s.ctx());
  const Tensor &dy = s.in(0, "dY"), &y = s.in(1, "Y");
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, y, "Y");
  for (size_t k = 2; k < s.ctx().inputs.size(); ++k)
    requireDeviceFloat(node, s.in(k, "X"), "X");
  const VariadicOperand *ops = operandTable(s, 2, dy.dims);
  void *dx = s.out(0, dy.dtype, dy.dims);
  launchExtremumGrad(dy.dtype, s.device(0), y.dtype, s.device(1), ops,
                     int(s.ctx().inputs.size() - 2), int(index), dx,
                     makeVariadicShape(dy.dims), s.stream());
}

} // namespace

std::vector<CudaOpEntry> piecewiseOps() {
  auto floatInputs = [](const Node &n) { return requireDeviceFloatFrom(n, 0); };
  return {
      {"", "LeakyRelu", runLeakyRelu, floatInputs},
      {"", "Clip", runClip, checkNumeric},
      {"", "Max", runVariadic<VariadicFold::Max>, checkNumeric},
      {"", "Min", runVariadic<VariadicFold::Min>, checkNumeric},
      {"", "Sum", runVariadic<VariadicFold::Sum>, checkNumeric},
      {kMpcDomain, "LeakyReluGrad", runLeakyReluGrad, floatInputs},
      {kMpcDomain, "ClipGrad", runClipGrad, floatInputs},
      {kMpcDomain, "ExtremumGrad", runExtremumGrad, floatInputs},
  };
}

} // namespace cuda
} // namespace mpc
