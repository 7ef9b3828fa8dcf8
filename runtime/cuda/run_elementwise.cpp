// CUDA runners of the elementwise family: arithmetic with broadcasting,
// unary math, Not, Pow, Cast, CastLike, ReluGrad, SumToShape and
// SumToShapeAs.
//
// Each runner validates its operands the way the CPU kernel does (the same
// helpers, so the same messages), allocates the outputs and hands device
// pointers to kernels/cuda/. Integer and fp64 operands are refused: on the
// GPU they would only ever be shape arithmetic, which fold-constants has
// already removed from compiled steps.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/reduce.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_broadcast.h"
#include "runtime/cuda/node_staging.h"

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

template <UnaryOp Op> void runUnary(NodeStaging &s) {
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(s.node(), x, "X");
  void *y = s.out(0, x.dtype, x.dims);
  launchUnary(Op, x.dtype, s.device(0), y, x.numel(), s.stream());
}

std::string checkUnary(const Node &node) {
  return requireDeviceFloat(node, {0});
}

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

// --- backward ops
// ----------------------------------------------------------------

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

std::vector<CudaOpEntry> elementwiseOps() {
  return {
      {"", "Add", runBinary<BinaryOp::Add>, checkBinary},
      {"", "Sub", runBinary<BinaryOp::Sub>, checkBinary},
      {"", "Mul", runBinary<BinaryOp::Mul>, checkBinary},
      {"", "Div", runBinary<BinaryOp::Div>, checkBinary},
      {"", "Pow", runPow, checkPow},
      {"", "Relu", runUnary<UnaryOp::Relu>, checkUnary},
      {"", "Neg", runUnary<UnaryOp::Neg>, checkUnary},
      {"", "Abs", runUnary<UnaryOp::Abs>, checkUnary},
      {"", "Sign", runUnary<UnaryOp::Sign>, checkUnary},
      {"", "Exp", runUnary<UnaryOp::Exp>, checkUnary},
      {"", "Log", runUnary<UnaryOp::Log>, checkUnary},
      {"", "Sqrt", runUnary<UnaryOp::Sqrt>, checkUnary},
      {"", "Tanh", runUnary<UnaryOp::Tanh>, checkUnary},
      {"", "Sigmoid", runUnary<UnaryOp::Sigmoid>, checkUnary},
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
      {kMpcDomain, "ReluGrad", runReluGrad,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1});
       }},
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
