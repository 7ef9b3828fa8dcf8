// CUDA runners of the elementwise ops: arithmetic with broadcasting, unary
// math, Not, IsNaN, IsInf, Pow, Cast, CastLike; the comparisons and logic
// (Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor) and
// Where; Clip, Max, Min, Sum and their gradients mpc.ClipGrad and
// mpc.ExtremumGrad; Trilu; and mpc.ErfGrad (GELU's gradient kernel in its
// erf form, run_activation.cpp).
//
// Each runner validates its operands the way the CPU kernel does (the same
// helpers, so the same messages), allocates the outputs and hands device
// pointers to kernels/cuda/. Integer and fp64 operands are refused: on the
// GPU they would only ever be shape arithmetic, which fold-constants has
// already removed from compiled steps.
//
// Comparisons: in the compiled steps of the models here fold-constants has
// already evaluated these (they build attention masks from shapes); they run
// on the device for graphs where they see data. Operand rules and messages
// are the CPU kernels' (kernels/cpu/elementwise.cpp).
//
// Clip, Max, Min, Sum: operand rules and messages are the CPU kernels'
// (kernels/cpu/elementwise.cpp; the shared checks of
// kernels/cpu/node_geometry.h). Only dtypes and shapes are read on the host:
// Clip's bounds are read by the kernel, so a device-resident step runs these
// nodes whatever computes their inputs. Clip, Max, Min and Sum take every
// numeric dtype the CPU kernels take (integers and fp64 too: shape arithmetic a
// graph keeps); the gradients take fp32, fp16 and bf16, and their entries
// refuse fp64 (which serves the CPU's float64 gradient checks) saying why.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/clip_variadic.h"
#include "kernels/cuda/compare.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/trilu.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_broadcast.h"
#include "runtime/cuda/node_staging.h"
#include "runtime/cuda/shared_runners.h"

#include <stdexcept>

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

// --- binary arithmetic
// ---------------------------------------------------------

template <BinaryOp Op> void runBinary(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &a = s.in(0, "A"), &b = s.in(1, "B");
  if (a.dtype != b.dtype)
    fail(node, "operands have different element types (", dtypeName(a.dtype),
         " and ", dtypeName(b.dtype), ")");
  requireDeviceFloat(node, a, "A");
  std::vector<int64_t> dims = cpu::broadcastShapes(node, a.dims, b.dims);
  const std::vector<int64_t> shapes[2] = {a.dims, b.dims};
  BroadcastGeometry<2> g = nodeBroadcastGeometry<2>(node, dims, shapes);
  void *y = s.out(0, a.dtype, dims);
  launchBinary(Op, a.dtype, s.device(0), s.device(1), y, g, s.stream());
}

std::string checkBinary(const Node &node) {
  return requireDeviceFloat(node, {0, 1});
}

// --- unary math
// ----------------------------------------------------------------

void runNot(NodeStaging &s) {
  const Tensor &x = s.in(0, "X");
  if (x.dtype != DType::Bool)
    cpu::fail(s.node(), "expects a bool input, got ", dtypeName(x.dtype));
  auto *y = static_cast<uint8_t *>(s.out(0, DType::Bool, x.dims));
  launchNot(static_cast<const uint8_t *>(s.device(0)), y, x.numel(),
            s.stream());
}

template <FloatPredicate P> void runFloatPredicate(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(node, x, "X");
  auto *y = static_cast<uint8_t *>(s.out(0, DType::Bool, x.dims));
  launchFloatPredicate(P, node.attrInt("detect_negative", 1) != 0,
                       node.attrInt("detect_positive", 1) != 0, x.dtype,
                       s.device(0), y, x.numel(), s.stream());
}

std::string checkNot(const Node &node) {
  const Value *x = node.input(0);
  if (!x || x->dtype == DType::Undefined || x->dtype == DType::Bool)
    return "";
  return std::string("it takes a bool input, not ") + dtypeName(x->dtype);
}

// --- Pow
// -----------------------------------------------------------------------

/// PyTorch's special cases of a scalar exponent, as the CPU kernel picks
/// them. The exponent is read on the host: it is a graph constant in every
/// model mpc compiles.
PowScalarMode powMode(float e) {
  if (e == 2.0f)
    return PowScalarMode::Square;
  if (e == 3.0f)
    return PowScalarMode::Cube;
  if (e == 0.5f)
    return PowScalarMode::Sqrt;
  if (e == -0.5f)
    return PowScalarMode::RSqrt;
  if (e == -1.0f)
    return PowScalarMode::Reciprocal;
  if (e == -2.0f)
    return PowScalarMode::ReciprocalSq;
  return PowScalarMode::General;
}

void runPow(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X"), &e = s.in(1, "Y");
  if (e.dtype == DType::Bool)
    fail(node, "exponent must be numeric, got bool");
  requireDeviceFloat(node, x, "X");
  std::vector<int64_t> dims = cpu::broadcastShapes(node, x.dims, e.dims);
  // A scalar exponent known on the host (always when staged; a constant in
  // a device-resident step) picks a specialised kernel; otherwise the
  // broadcast kernel reads it on the device.
  if (e.numel() == 1 && dims == x.dims && s.hasHostValue(1)) {
    float v = float(cpu::loadDouble(s.hostValue(1, "exponent"), 0));
    void *y = s.out(0, x.dtype, dims);
    launchPowScalar(x.dtype, s.device(0), y, x.numel(), powMode(v), v,
                    s.stream());
    return;
  }
  const std::vector<int64_t> shapes[2] = {x.dims, e.dims};
  BroadcastGeometry<2> g = nodeBroadcastGeometry<2>(node, dims, shapes);
  void *y = s.out(0, x.dtype, dims);
  launchPowBroadcast(x.dtype, s.device(0), e.dtype, s.device(1), y, g,
                     s.stream());
}

std::string checkPow(const Node &node) {
  std::string why = requireDeviceFloat(node, {0});
  const Value *e = node.input(1);
  if (why.empty() && e && e->dtype != DType::Undefined &&
      !isDeviceFloat(e->dtype) && e->dtype != DType::I64 &&
      e->dtype != DType::I32)
    why = std::string("its exponent must be fp32, fp16, bf16, int64 or "
                      "int32, got ") +
          dtypeName(e->dtype);
  return why;
}

// --- Cast
// ----------------------------------------------------------------------

DType castTarget(const Node &node) {
  const Attribute *to = node.attr("to");
  if (!to || to->kind != Attribute::Kind::Int)
    fail(node, "missing int attribute 'to'");
  std::optional<DType> dst = fromOnnxDataType(int(to->i));
  if (!dst)
    fail(node, "unsupported target type ", to->i);
  return *dst;
}

/// Cast (or CastLike) of input 0 to dst.
void castTo(NodeStaging &s, DType dst) {
  const Tensor &x = s.in(0, "input");
  if (dst != x.dtype && !castSupported(x.dtype, dst))
    fail(s.node(),
         "the cuda backend casts between fp32, fp16, bf16 and bool, and "
         "int64/int32/fp64 to fp32, not ",
         dtypeName(x.dtype), " to ", dtypeName(dst));
  void *y = s.out(0, dst, x.dims);
  launchCast(x.dtype, dst, s.device(0), y, x.numel(), s.stream());
}

/// Why a cast from `from` to `to` cannot run, or "" (unknown dtypes pass:
/// the runner checks them).
std::string castRefusal(DType from, DType to) {
  if (from == DType::Undefined || to == DType::Undefined || to == from ||
      castSupported(from, to))
    return "";
  return std::string("it casts between fp32, fp16, bf16 and bool, and "
                     "int64/int32/fp64 to fp32, not ") +
         dtypeName(from) + " to " + dtypeName(to);
}

void runCast(NodeStaging &s) { castTo(s, castTarget(s.node())); }

std::string checkCast(const Node &node) {
  const Attribute *to = node.attr("to");
  const Value *x = node.input(0);
  if (!to || !x)
    return "";
  std::optional<DType> dst = fromOnnxDataType(int(to->i));
  return dst ? castRefusal(x->dtype, *dst) : "";
}

/// CastLike(input, target_type): Cast to target_type's dtype, whose
/// values are never read (so never uploaded).
void runCastLike(NodeStaging &s) { castTo(s, s.in(1, "target_type").dtype); }

std::string checkCastLike(const Node &node) {
  const Value *x = node.input(0), *like = node.input(1);
  return x && like ? castRefusal(x->dtype, like->dtype) : "";
}

// --- comparisons and logic
// --------------------------------------------------------------------------

using cpu::fail;

constexpr bool isLogical(CompareOp op) {
  return op == CompareOp::And || op == CompareOp::Or || op == CompareOp::Xor;
}

template <CompareOp Op> void runCompare(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &a = s.in(0, "A"), &b = s.in(1, "B");
  if (a.dtype != b.dtype)
    fail(node, "operands have different element types (", dtypeName(a.dtype),
         " and ", dtypeName(b.dtype), ")");
  if (isLogical(Op) && a.dtype != DType::Bool)
    fail(node, "takes bool operands, got ", dtypeName(a.dtype));
  if (a.dtype == DType::Bool && Op != CompareOp::Equal && !isLogical(Op))
    fail(node, "does not support bool operands");
  if (!compareSupported(Op, a.dtype))
    fail(node,
         "the cuda backend compares fp32, fp16, bf16, int64 or int32, "
         "not ",
         dtypeName(a.dtype));
  std::vector<int64_t> dims = cpu::broadcastShapes(node, a.dims, b.dims);
  const std::vector<int64_t> shapes[2] = {a.dims, b.dims};
  BroadcastGeometry<2> g = nodeBroadcastGeometry<2>(node, dims, shapes);
  auto *y = static_cast<uint8_t *>(s.out(0, DType::Bool, dims));
  launchCompare(Op, a.dtype, s.device(0), s.device(1), y, g, s.stream());
}

template <CompareOp Op> std::string checkCompare(const Node &node) {
  const Value *a = node.input(0);
  if (!a || a->dtype == DType::Undefined || compareSupported(Op, a->dtype))
    return "";
  if (isLogical(Op))
    return std::string("it takes bool operands, not ") + dtypeName(a->dtype);
  return std::string("it compares fp32, fp16, bf16, int64 or int32, not ") +
         dtypeName(a->dtype);
}

void runWhere(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &c = s.in(0, "condition"), &a = s.in(1, "X"), &b = s.in(2, "Y");
  if (c.dtype != DType::Bool)
    fail(node, "condition must be bool, got ", dtypeName(c.dtype));
  if (a.dtype != b.dtype)
    fail(node, "X and Y have different element types (", dtypeName(a.dtype),
         " and ", dtypeName(b.dtype), ")");
  requireCopyable(node, a);
  std::vector<int64_t> dims = cpu::broadcastShapes(
      node, cpu::broadcastShapes(node, c.dims, a.dims), b.dims);
  const std::vector<int64_t> shapes[3] = {c.dims, a.dims, b.dims};
  BroadcastGeometry<3> g = nodeBroadcastGeometry<3>(node, dims, shapes);
  void *y = s.out(0, a.dtype, dims);
  launchWhere(dtypeSize(a.dtype), static_cast<const uint8_t *>(s.device(0)),
              s.device(1), s.device(2), y, g, s.stream());
}

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

// --- Trilu
// --------------------------------------------------------------------------

/// Trilu: k is read on the host (a constant in exported masks).
void runTrilu(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "input");
  requireCopyable(node, x);
  int64_t k = cpu::triluDiagonal(node, s.optionalIn(1) ? &s.hostValue(1, "k")
                                                       : nullptr);
  if (x.dims.size() < 2)
    fail(node, "input must have rank >= 2, got ", cpu::shapeString(x.dims));
  const int64_t rows = x.dims[x.dims.size() - 2], cols = x.dims.back();
  const int64_t matrices = rows > 0 && cols > 0 ? x.numel() / (rows * cols) : 0;
  void *y = s.out(0, x.dtype, x.dims);
  launchTrilu(dtypeSize(x.dtype), s.device(0), y, matrices, rows, cols, k,
              node.attrInt("upper", 1) != 0, s.stream());
}

} // namespace

std::vector<CudaOpEntry> elementwiseOps() {
  auto floatInputs = [](const Node &n) { return requireDeviceFloatFrom(n, 0); };
  return {
      {"", "Add", runBinary<BinaryOp::Add>, checkBinary},
      {"", "Sub", runBinary<BinaryOp::Sub>, checkBinary},
      {"", "Mul", runBinary<BinaryOp::Mul>, checkBinary},
      {"", "Div", runBinary<BinaryOp::Div>, checkBinary},
      {"", "Pow", runPow, checkPow},
      {"", "Neg", runUnary<UnaryOp::Neg>, checkUnary},
      {"", "Abs", runUnary<UnaryOp::Abs>, checkUnary},
      {"", "Sign", runUnary<UnaryOp::Sign>, checkUnary},
      {"", "Exp", runUnary<UnaryOp::Exp>, checkUnary},
      {"", "Log", runUnary<UnaryOp::Log>, checkUnary},
      {"", "Sqrt", runUnary<UnaryOp::Sqrt>, checkUnary},
      {"", "Erf", runUnary<UnaryOp::Erf>, checkUnary},
      {"", "Sin", runUnary<UnaryOp::Sin>, checkUnary},
      {"", "Floor", runUnary<UnaryOp::Floor>, checkUnary},
      {"", "Ceil", runUnary<UnaryOp::Ceil>, checkUnary},
      {"", "Round", runUnary<UnaryOp::Round>, checkUnary},
      {"", "Cos", runUnary<UnaryOp::Cos>, checkUnary},
      {"", "Not", runNot, checkNot},
      {"", "IsNaN", runFloatPredicate<FloatPredicate::IsNaN>, checkUnary},
      {"", "IsInf", runFloatPredicate<FloatPredicate::IsInf>, checkUnary},
      {"", "Cast", runCast, checkCast},
      {"", "CastLike", runCastLike, checkCastLike},
      {"", "Equal", runCompare<CompareOp::Equal>,
       checkCompare<CompareOp::Equal>},
      {"", "Less", runCompare<CompareOp::Less>, checkCompare<CompareOp::Less>},
      {"", "Greater", runCompare<CompareOp::Greater>,
       checkCompare<CompareOp::Greater>},
      {"", "LessOrEqual", runCompare<CompareOp::LessOrEqual>,
       checkCompare<CompareOp::LessOrEqual>},
      {"", "GreaterOrEqual", runCompare<CompareOp::GreaterOrEqual>,
       checkCompare<CompareOp::GreaterOrEqual>},
      {"", "And", runCompare<CompareOp::And>, checkCompare<CompareOp::And>},
      {"", "Or", runCompare<CompareOp::Or>, checkCompare<CompareOp::Or>},
      {"", "Xor", runCompare<CompareOp::Xor>, checkCompare<CompareOp::Xor>},
      {"", "Where", runWhere, noCheck},
      {"", "Clip", runClip, checkNumeric},
      {"", "Max", runVariadic<VariadicFold::Max>, checkNumeric},
      {"", "Min", runVariadic<VariadicFold::Min>, checkNumeric},
      {"", "Sum", runVariadic<VariadicFold::Sum>, checkNumeric},
      {kMpcDomain, "ClipGrad", runClipGrad, floatInputs},
      {kMpcDomain, "ExtremumGrad", runExtremumGrad, floatInputs},
      // k: read on the host.
      {"", "Trilu", runTrilu, noCheck, 1u << 1},
      {kMpcDomain, "ErfGrad", runGeluGrad<GeluGradKind::Erf>, checkInputs01},
  };
}

} // namespace cuda
} // namespace mpc
