// Elementwise CPU kernels: arithmetic, comparisons and logic, unary math,
// Cast, CastLike, Where, Identity, Trilu, Clip, the variadic Max/Min/Sum, and
// the backward ops mpc.ErfGrad, mpc.ClipGrad and mpc.ExtremumGrad.
//
// Binary ops broadcast numpy-style. Floating ops load every element into
// fp32 (fp64 for fp64 tensors), compute there and round once on store, which
// is what the GPU's fp16/bf16 kernels do; integer ops compute exactly in
// their own type (fold-constants runs shape arithmetic through them).
// Integer division and modulo by zero are errors, not traps.
//
// Numerics as everywhere in kernels/cpu: fp16/bf16 are storage types, each
// element is computed on in fp32 and rounded to nearest-even once when
// stored; fp64 computes in double, which the float64 finite-difference
// checks of the gradient rules rely on. Every sum accumulates in that
// compute type, never in fp16. The backward kernels may see operands of
// different precisions (autocast can leave an fp32 gradient meeting an fp16
// activation): they compute in double when any operand is fp64, else in
// fp32, and store in dY's dtype (compute_support.h).
#include "ir/mpc_ops.h"
#include "ir/round_to_odd.h"
#include "kernels/common/gelu_math.h"
#include "kernels/common/piecewise_math.h"
#include "kernels/common/trilu_math.h"
#include "kernels/cpu/compute_support.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/elementwise_support.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>

namespace mpc {
namespace cpu {

namespace {

// --- shared loops ------------------------------------------------------------

/// y = op(a, b) with broadcasting; a and b share the dtype of Io, y has
/// OutIo's dtype.
template <typename Io, typename OutIo, typename Op>
void binaryLoop(KernelContext &ctx, Op op) {
  const Tensor &a = input(ctx, 0, "A"), &b = input(ctx, 1, "B");
  std::vector<int64_t> dims = broadcastShapes(ctx.node, a.dims, b.dims);
  Tensor &y = overwrittenOutput(ctx, 0, OutIo::dtype, dims);
  const auto *pa = ptr<Io>(a);
  const auto *pb = ptr<Io>(b);
  auto *py = ptr<OutIo>(y);
  const std::vector<int64_t> shapes[2] = {a.dims, b.dims};
  using C = typename Io::Compute;
  using OutC = typename OutIo::Compute;
  if constexpr (std::is_floating_point_v<C> && std::is_floating_point_v<OutC>) {
    // Block by block: the same op on the same fp32 (fp64) values as one
    // element at a time, but the widening and rounding run over whole
    // blocks and the op loop vectorises. y may be in place over a or b:
    // each block is read before it is written.
    C bufA[kBlock], bufB[kBlock];
    OutC bufY[kBlock];
    forEachBroadcastRun(
        dims, shapes,
        [&](int64_t i, int64_t len, const int64_t *off, const int64_t *step) {
          for (int64_t c = 0; c < len; c += kBlock) {
            int64_t m = std::min(kBlock, len - c);
            const C *va =
                runValues<Io>(pa + off[0] + c * step[0], step[0], m, bufA);
            const C *vb =
                runValues<Io>(pb + off[1] + c * step[1], step[1], m, bufB);
            if constexpr (std::is_same_v<typename OutIo::Storage, OutC>) {
              // Straight into y: element j of a block is read before it is
              // written, and y in place over an operand has its layout.
              OutC *dst = py + i + c;
              for (int64_t j = 0; j < m; ++j)
                dst[j] = op(va[j], vb[j]);
            } else {
              for (int64_t j = 0; j < m; ++j)
                bufY[j] = op(va[j], vb[j]);
              storeRun<OutIo>(py + i + c, m, bufY);
            }
          }
        });
  } else {
    forEachBroadcast(dims, shapes, [&](int64_t i, const int64_t *o) {
      OutIo::store(py, i, op(Io::load(pa, o[0]), Io::load(pb, o[1])));
    });
  }
}

void requireSameType(const KernelContext &ctx) {
  const Tensor &a = input(ctx, 0, "A"), &b = input(ctx, 1, "B");
  if (a.dtype != b.dtype)
    fail(ctx.node, "operands have different element types (",
         dtypeName(a.dtype), " and ", dtypeName(b.dtype), ")");
}

// --- arithmetic --------------------------------------------------------------

template <typename Op> void arithmetic(KernelContext &ctx, Op op) {
  requireSameType(ctx);
  dispatchNumeric(ctx.node, ctx.in(0).dtype, [&](auto io) {
    using Io = decltype(io);
    binaryLoop<Io, Io>(ctx, [&](auto a, auto b) { return op(a, b); });
  });
}

// Integer + - * wrap around like the GPU's and numpy's; computing through the
// unsigned type keeps that defined behaviour in C++.
template <typename T> T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) + U(b));
}
template <typename T> T wrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) - U(b));
}
template <typename T> T wrapMul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) * U(b));
}

void kernelAdd(KernelContext &ctx) {
  arithmetic(ctx, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>)
      return wrapAdd(a, b);
    else
      return T(a + b);
  });
}

void kernelSub(KernelContext &ctx) {
  arithmetic(ctx, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>)
      return wrapSub(a, b);
    else
      return T(a - b);
  });
}

void kernelMul(KernelContext &ctx) {
  arithmetic(ctx, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>)
      return wrapMul(a, b);
    else
      return T(a * b);
  });
}

void kernelDiv(KernelContext &ctx) {
  const Node &node = ctx.node;
  arithmetic(ctx, [&](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>) {
      // Integer division truncates toward zero (C, ONNX Runtime).
      if (b == 0)
        fail(node, "integer division by zero");
      if (std::is_signed_v<T> && b == T(-1))
        return wrapSub(T(0), a); // MIN / -1 wraps instead of trapping
      return T(a / b);
    } else {
      return T(a / b);
    }
  });
}

/// Mod: fmod=0 takes the divisor's sign (Python's %, integers only), fmod=1
/// the dividend's (C's % and fmod). Both are exact.
void kernelMod(KernelContext &ctx) {
  const Node &node = ctx.node;
  const bool fmod = node.attrInt("fmod", 0) != 0;
  if (!fmod && isFloating(ctx.in(0).dtype))
    fail(node, "takes ", dtypeName(ctx.in(0).dtype),
         " operands only with fmod=1");
  arithmetic(ctx, [&](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>) {
      if (b == 0)
        fail(node, "integer modulo by zero");
      if (std::is_signed_v<T> && b == T(-1))
        return T(0); // MIN % -1 is 0; C++ may trap on it
      T r = T(a % b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0)))
        r = T(r + b);
      return r;
    } else {
      return T(std::fmod(a, b));
    }
  });
}

// --- Pow ---------------------------------------------------------------------

template <typename T> T intPow(T base, int64_t e) {
  if (e < 0) // integer reciprocal: only +-1 survive truncation
    return base == 1 ? T(1) : base == T(-1) ? T(e % 2 ? -1 : 1) : T(0);
  T r = 1;
  while (e) {
    if (e & 1)
      r = wrapMul(r, base);
    base = wrapMul(base, base);
    e >>= 1;
  }
  return r;
}

template <typename C> C floatPow(C x, C e) { return std::pow(x, e); }

/// Pow(X, Y): Y may have any numeric dtype; the result has X's dtype. A
/// scalar exponent takes PyTorch's exact special cases (x*x for 2, sqrt for
/// 0.5, ...), so that exported `x ** 2` computes what PyTorch computed.
void kernelPow(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "X"), &ey = input(ctx, 1, "Y");
  if (ey.dtype == DType::Bool)
    fail(ctx.node, "exponent must be numeric, got bool");
  dispatchNumeric(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    std::vector<int64_t> dims = broadcastShapes(ctx.node, x.dims, ey.dims);
    Tensor &y = output(ctx, 0, x.dtype, dims);
    const auto *px = ptr<Io>(x);
    auto *py = ptr<Io>(y);
    if constexpr (std::is_integral_v<C>) {
      const std::vector<int64_t> shapes[2] = {x.dims, ey.dims};
      forEachBroadcast(dims, shapes, [&](int64_t i, const int64_t *o) {
        Io::store(py, i,
                  intPow(Io::load(px, o[0]), int64_t(loadDouble(ey, o[1]))));
      });
    } else {
      if (ey.numel() == 1 && dims == x.dims) {
        C e = C(loadDouble(ey, 0));
        int64_t n = x.numel();
        auto apply = [&](auto f) {
          for (int64_t i = 0; i < n; ++i)
            Io::store(py, i, f(Io::load(px, i)));
        };
        if (e == C(2))
          apply([](C v) { return v * v; });
        else if (e == C(3))
          apply([](C v) { return v * v * v; });
        else if (e == C(0.5))
          apply([](C v) { return std::sqrt(v); });
        else if (e == C(-0.5))
          apply([](C v) { return C(1) / std::sqrt(v); });
        else if (e == C(-1))
          apply([](C v) { return C(1) / v; });
        else if (e == C(-2))
          apply([](C v) { return C(1) / (v * v); });
        else
          apply([&](C v) { return floatPow(v, e); });
        return;
      }
      const std::vector<int64_t> shapes[2] = {x.dims, ey.dims};
      forEachBroadcast(dims, shapes, [&](int64_t i, const int64_t *o) {
        Io::store(py, i, floatPow(Io::load(px, o[0]), C(loadDouble(ey, o[1]))));
      });
    }
  });
}

// --- comparisons -------------------------------------------------------------

template <typename Op> void compare(KernelContext &ctx, bool allowBool, Op op) {
  requireSameType(ctx);
  DType t = ctx.in(0).dtype;
  if (t == DType::Bool && !allowBool)
    fail(ctx.node, "does not support bool operands");
  dispatchAll(ctx.node, t, [&](auto io) {
    using Io = decltype(io);
    binaryLoop<Io, BoolIo>(ctx, [&](auto a, auto b) { return op(a, b); });
  });
}

void kernelEqual(KernelContext &ctx) {
  compare(ctx, true, [](auto a, auto b) { return a == b; });
}
void kernelGreater(KernelContext &ctx) {
  compare(ctx, false, [](auto a, auto b) { return a > b; });
}
void kernelLess(KernelContext &ctx) {
  compare(ctx, false, [](auto a, auto b) { return a < b; });
}
void kernelLessOrEqual(KernelContext &ctx) {
  compare(ctx, false, [](auto a, auto b) { return a <= b; });
}
void kernelGreaterOrEqual(KernelContext &ctx) {
  compare(ctx, false, [](auto a, auto b) { return a >= b; });
}

/// And, Or, Xor: bool operands, broadcast.
template <typename Op> void logical(KernelContext &ctx, Op op) {
  requireSameType(ctx);
  if (ctx.in(0).dtype != DType::Bool)
    fail(ctx.node, "expects bool operands, got ", dtypeName(ctx.in(0).dtype));
  binaryLoop<BoolIo, BoolIo>(ctx,
                             [&](bool a, bool b) { return bool(op(a, b)); });
}
void kernelAnd(KernelContext &ctx) {
  logical(ctx, [](bool a, bool b) { return a && b; });
}
void kernelOr(KernelContext &ctx) {
  logical(ctx, [](bool a, bool b) { return a || b; });
}
void kernelXor(KernelContext &ctx) {
  logical(ctx, [](bool a, bool b) { return a != b; });
}

void kernelNot(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "X");
  if (x.dtype != DType::Bool)
    fail(ctx.node, "expects a bool input, got ", dtypeName(x.dtype));
  unaryLoop<BoolIo>(ctx, [](bool v) { return !v; });
}

/// IsNaN and IsInf: a bool per element of a floating-point X.
template <typename Pred> void floatPredicate(KernelContext &ctx, Pred pred) {
  const Tensor &x = input(ctx, 0, "X");
  Tensor &y = output(ctx, 0, DType::Bool, x.dims);
  auto *py = ptr<BoolIo>(y);
  dispatchFloat(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    const auto *px = ptr<Io>(x);
    for (int64_t i = 0, n = x.numel(); i < n; ++i)
      BoolIo::store(py, i, pred(Io::load(px, i)));
  });
}

void kernelIsNaN(KernelContext &ctx) {
  floatPredicate(ctx, [](auto v) { return std::isnan(v); });
}

void kernelIsInf(KernelContext &ctx) {
  bool neg = ctx.node.attrInt("detect_negative", 1) != 0;
  bool pos = ctx.node.attrInt("detect_positive", 1) != 0;
  floatPredicate(ctx,
                 [&](auto v) { return std::isinf(v) && (v < 0 ? neg : pos); });
}

// --- unary math --------------------------------------------------------------

void kernelNeg(KernelContext &ctx) {
  numericUnary(ctx, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_integral_v<T>)
      return wrapSub(T(0), v);
    else
      return -v;
  });
}

void kernelAbs(KernelContext &ctx) {
  numericUnary(ctx, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_integral_v<T>)
      return v < 0 ? wrapSub(T(0), v) : v;
    else
      return std::abs(v);
  });
}

/// Sign: -1, 0 or 1 in x's type; NaN stays NaN (ONNX's reference and ONNX
/// Runtime; torch.sign gives 0). The bin edges of an exported
/// AdaptiveAvgPool2d with non-dividing sizes go through it.
void kernelSign(KernelContext &ctx) {
  numericUnary(ctx, [](auto v) {
    using T = decltype(v);
    return v > T(0) ? T(1) : v < T(0) ? T(-1) : v == T(0) ? T(0) : v;
  });
}

void kernelSqrt(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::sqrt(v); });
}
void kernelExp(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::exp(v); });
}
void kernelLog(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::log(v); });
}

void kernelErf(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::erf(v); });
}
void kernelSin(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::sin(v); });
}
void kernelCos(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::cos(v); });
}
// Floor, Ceil and Round are exact in any float type: the result of an fp16
// or bf16 value is representable. Round is half to even (ONNX), which is
// nearbyint under the default rounding mode.
void kernelFloor(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::floor(v); });
}
void kernelCeil(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::ceil(v); });
}
void kernelRound(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::nearbyint(v); });
}

// --- Cast --------------------------------------------------------------------

/// Float -> integer: truncation toward zero as ONNX specifies; values out of
/// the target range saturate and NaN becomes 0 (ONNX leaves both undefined;
/// this keeps them defined and deterministic).
template <typename T> T floatToInt(double v) {
  if (std::isnan(v))
    return 0;
  const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);
  if (v >= hi)
    return std::numeric_limits<T>::max();
  if (std::is_signed_v<T> ? v < -hi : v < 0)
    return std::numeric_limits<T>::min();
  return T(v);
}

template <typename DstIo, typename SrcIo>
void castLoop(const Tensor &x, Tensor &y) {
  using S = typename SrcIo::Compute;
  using D = typename DstIo::Compute;
  const auto *px = ptr<SrcIo>(x);
  auto *py = ptr<DstIo>(y);
  int64_t n = x.numel();
  // The casts autocast inserts, over whole buffers (F16C where available,
  // vectorised loops for bf16).
  if constexpr (SrcIo::dtype == DType::F32 && DstIo::dtype == DType::F16) {
    parallelFor(n, kGrainValues, [&](int64_t b, int64_t e) {
      floatToHalfN(px + b, py + b, e - b);
    });
    return;
  } else if constexpr (SrcIo::dtype == DType::F16 &&
                       DstIo::dtype == DType::F32) {
    parallelFor(n, kGrainValues, [&](int64_t b, int64_t e) {
      halfToFloatN(px + b, py + b, e - b);
    });
    return;
  } else if constexpr (SrcIo::dtype == DType::F32 &&
                       DstIo::dtype == DType::BF16) {
    parallelFor(n, kGrainValues, [&](int64_t b, int64_t e) {
      floatToBf16N(px + b, py + b, e - b);
    });
    return;
  } else if constexpr (SrcIo::dtype == DType::BF16 &&
                       DstIo::dtype == DType::F32) {
    parallelFor(n, kGrainValues, [&](int64_t b, int64_t e) {
      bf16ToFloatN(px + b, py + b, e - b);
    });
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    S v = SrcIo::load(px, i);
    if constexpr (std::is_same_v<D, bool>) {
      DstIo::store(py, i, v != S(0));
    } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
      DstIo::store(py, i, floatToInt<D>(double(v)));
    } else if constexpr ((DstIo::dtype == DType::F16 ||
                          DstIo::dtype == DType::BF16) &&
                         !std::is_same_v<S, float>) {
      // fp64 and integer sources: one rounding from the exact value.
      DstIo::store(py, i, roundToOddFloat(double(v)));
    } else {
      DstIo::store(py, i, D(v));
    }
  }
}

void kernelCast(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  const Attribute *to = ctx.node.attr("to");
  if (!to || to->kind != Attribute::Kind::Int)
    fail(ctx.node, "missing int attribute 'to'");
  std::optional<DType> dst = fromOnnxDataType(int(to->i));
  if (!dst)
    fail(ctx.node, "unsupported target type ", to->i);
  Tensor &y = overwrittenOutput(ctx, 0, *dst, x.dims);
  if (*dst == x.dtype) {
    y.bytes = x.bytes;
    return;
  }
  dispatchAll(ctx.node, x.dtype, [&](auto src) {
    dispatchAll(ctx.node, *dst, [&](auto dstIo) {
      castLoop<decltype(dstIo), decltype(src)>(x, y);
    });
  });
}

// --- Where -------------------------------------------------------------------

void kernelWhere(KernelContext &ctx) {
  const Tensor &c = input(ctx, 0, "condition"), &a = input(ctx, 1, "X"),
               &b = input(ctx, 2, "Y");
  if (c.dtype != DType::Bool)
    fail(ctx.node, "condition must be bool, got ", dtypeName(c.dtype));
  if (a.dtype != b.dtype)
    fail(ctx.node, "X and Y have different element types (", dtypeName(a.dtype),
         " and ", dtypeName(b.dtype), ")");
  std::vector<int64_t> dims = broadcastShapes(
      ctx.node, broadcastShapes(ctx.node, c.dims, a.dims), b.dims);
  Tensor &y = output(ctx, 0, a.dtype, dims);
  size_t size = dtypeSize(a.dtype);
  const uint8_t *pc = c.data<uint8_t>();
  const std::vector<int64_t> shapes[3] = {c.dims, a.dims, b.dims};
  forEachBroadcast(dims, shapes, [&](int64_t i, const int64_t *o) {
    if (pc[o[0]])
      copyElement(y.bytes.data(), i, a.bytes.data(), o[1], size);
    else
      copyElement(y.bytes.data(), i, b.bytes.data(), o[2], size);
  });
}

void kernelIdentity(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  copyWithDims(ctx, x, x.dims);
}

/// Trilu: the kept run of each row of each matrix copied, the rest zeroed
/// (all-zero bytes are 0 in every dtype).
void kernelTrilu(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "input");
  int64_t k = triluDiagonal(node, optionalInput(ctx, 1));
  const bool upper = node.attrInt("upper", 1) != 0;
  if (x.dims.size() < 2)
    fail(node, "input must have rank >= 2, got ", shapeString(x.dims));
  Tensor &y = output(ctx, 0, x.dtype, x.dims);
  const int64_t rows = x.dims[x.dims.size() - 2], cols = x.dims.back();
  const size_t size = dtypeSize(x.dtype);
  const int64_t matrices = rows > 0 && cols > 0 ? x.numel() / (rows * cols) : 0;
  const uint8_t *px = x.bytes.data();
  uint8_t *py = y.bytes.data();
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < rows; ++i) {
      size_t row = size_t((m * rows + i) * cols) * size;
      TriluRun run = triluKeptColumns(i, cols, k, upper);
      std::memset(py + row, 0, size_t(run.begin) * size);
      std::memmove(py + row + size_t(run.begin) * size,
                   px + row + size_t(run.begin) * size,
                   size_t(run.end - run.begin) * size);
      std::memset(py + row + size_t(run.end) * size, 0,
                  size_t(cols - run.end) * size);
    }
}

// --- Clip --------------------------------------------------------------------

/// Clip: min/max are optional scalar inputs (opset 11+) or float attributes
/// (opset 6); an absent bound does not bound. min(max(x, lo), hi), so lo >
/// hi gives hi everywhere, as in PyTorch's clamp; NaN stays NaN.
void kernelClip(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "input");
  const Tensor *lo = optionalInput(ctx, 1), *hi = optionalInput(ctx, 2);
  for (const Tensor *b : {lo, hi})
    if (b && (b->numel() != 1 || b->dtype != x.dtype))
      fail(node, "min and max must be single elements of the input's type ",
           dtypeName(x.dtype), ", got ", dtypeName(b->dtype), " ",
           shapeString(b->dims));
  Tensor &y = output(ctx, 0, x.dtype, x.dims);
  dispatchNumeric(node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    bool hasLo = lo || node.hasAttr("min"), hasHi = hi || node.hasAttr("max");
    C vlo = lo ? Io::load(ptr<Io>(*lo), 0) : C(node.attrFloat("min", 0));
    C vhi = hi ? Io::load(ptr<Io>(*hi), 0) : C(node.attrFloat("max", 0));
    const auto *px = ptr<Io>(x);
    auto *py = ptr<Io>(y);
    for (int64_t i = 0, n = x.numel(); i < n; ++i)
      Io::store(py, i, clipValue(Io::load(px, i), hasLo, vlo, hasHi, vhi));
  });
}

// --- Max, Min, Sum -----------------------------------------------------------

enum class Fold { Max, Min, Sum };

/// Max/Min/Sum of n broadcast inputs: combined in the compute type, stored
/// once. NaN wins in Max and Min (PyTorch's maximum/minimum propagate it).
template <Fold F> void variadicKernel(KernelContext &ctx) {
  std::vector<int64_t> dims = variadicShape(ctx);
  DType t = ctx.in(0).dtype;
  Tensor &y = output(ctx, 0, t, dims);
  dispatchNumeric(ctx.node, t, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    std::vector<C> acc(size_t(y.numel()));
    for (size_t k = 0; k < ctx.inputs.size(); ++k) {
      const Tensor &in = ctx.in(k);
      const auto *p = ptr<Io>(in);
      const std::vector<int64_t> shapes[1] = {in.dims};
      forEachBroadcast(dims, shapes, [&](int64_t i, const int64_t *o) {
        C v = Io::load(p, o[0]);
        C &a = acc[size_t(i)];
        if (k == 0) {
          a = v;
        } else if constexpr (F == Fold::Sum) {
          a = sumFold(a, v);
        } else {
          a = extremumFold(F == Fold::Max, a, v);
        }
      });
    }
    auto *py = ptr<Io>(y);
    for (size_t i = 0; i < acc.size(); ++i)
      Io::store(py, int64_t(i), acc[i]);
  });
}

// --- CastLike ----------------------------------------------------------------

/// CastLike(x, like) is Cast(x) <to = like's dtype>: run through the Cast
/// kernel itself, so both convert bit for bit alike.
void kernelCastLike(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  const Tensor &like = input(ctx, 1, "target_type");
  castWithCastKernel(ctx.node, x, like.dtype, ctx.outputs.at(0), ctx.seed);
}

// --- elementwise gradients ---------------------------------------------------

void kernelErfGrad(KernelContext &ctx) {
  unaryGrad(ctx, [](auto g, auto x) { return erfGradValue(g, x); });
}

void kernelClipGrad(KernelContext &ctx) {
  const Tensor *lo = optionalInput(ctx, 2), *hi = optionalInput(ctx, 3);
  for (const Tensor *b : {lo, hi})
    if (b && (b->numel() != 1 || !isFloating(b->dtype)))
      fail(ctx.node, "min and max must be single floating-point elements, got ",
           dtypeName(b->dtype), " ", shapeString(b->dims));
  // The opset-6 form carries its bounds as attributes.
  const Node &node = ctx.node;
  double vlo = lo ? lo->getAsDouble(0) : node.attrFloat("min", -INFINITY);
  double vhi = hi ? hi->getAsDouble(0) : node.attrFloat("max", INFINITY);
  unaryGrad(ctx, [&](auto g, auto x) {
    using C = decltype(g);
    return clipGradValue(g, x, C(vlo), C(vhi));
  });
}

/// ExtremumGrad(dY, Y, X0..Xn-1) <index>: dY split evenly among the inputs
/// equal to Y at each position.
void kernelExtremumGrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  int64_t index = extremumGradIndex(ctx);
  const Tensor &dy = ctx.in(0), &y = ctx.in(1);
  Tensor &dx = output(ctx, 0, dy.dtype, dy.dims);
  withCompute(node, {&dy, &y}, [&](auto c) {
    using C = decltype(c);
    std::vector<C> g = loadAll<C>(dy), yv = loadAll<C>(y);
    std::vector<C> ties(g.size(), C(0));
    std::vector<bool> mine(g.size(), false);
    for (size_t k = 2; k < ctx.inputs.size(); ++k) {
      const Tensor &xk = ctx.in(k);
      std::vector<C> xv = loadAll<C>(xk);
      const std::vector<int64_t> shapes[1] = {xk.dims};
      forEachBroadcast(dy.dims, shapes, [&](int64_t i, const int64_t *o) {
        bool eq = xv[size_t(o[0])] == yv[size_t(i)];
        ties[size_t(i)] += eq ? C(1) : C(0);
        if (k - 2 == size_t(index))
          mine[size_t(i)] = eq;
      });
    }
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = extremumGradShare(g[i], bool(mine[i]), ties[i]);
    storeAll(dx, g);
  });
}

} // namespace

std::vector<KernelEntry> elementwiseKernels() {
  return {
      {"", "Add", kernelAdd},
      {"", "Sub", kernelSub},
      {"", "Mul", kernelMul},
      {"", "Div", kernelDiv},
      {"", "Mod", kernelMod},
      {"", "Pow", kernelPow},
      {"", "Neg", kernelNeg},
      {"", "Abs", kernelAbs},
      {"", "Sign", kernelSign},
      {"", "Sqrt", kernelSqrt},
      {"", "Exp", kernelExp},
      {"", "Log", kernelLog},
      {"", "Erf", kernelErf},
      {"", "Equal", kernelEqual},
      {"", "Greater", kernelGreater},
      {"", "Less", kernelLess},
      {"", "Not", kernelNot},
      {"", "IsNaN", kernelIsNaN},
      {"", "IsInf", kernelIsInf},
      {"", "Cast", kernelCast},
      {"", "Where", kernelWhere},
      {"", "LessOrEqual", kernelLessOrEqual},
      {"", "GreaterOrEqual", kernelGreaterOrEqual},
      {"", "And", kernelAnd},
      {"", "Or", kernelOr},
      {"", "Xor", kernelXor},
      {"", "Sin", kernelSin},
      {"", "Floor", kernelFloor},
      {"", "Ceil", kernelCeil},
      {"", "Round", kernelRound},
      {"", "Cos", kernelCos},
      {"", "Identity", kernelIdentity},
      {"", "Trilu", kernelTrilu},
      {"", "Clip", kernelClip},
      {"", "Max", variadicKernel<Fold::Max>},
      {"", "Min", variadicKernel<Fold::Min>},
      {"", "Sum", variadicKernel<Fold::Sum>},
      {"", "CastLike", kernelCastLike},
      {kMpcDomain, "ErfGrad", kernelErfGrad},
      {kMpcDomain, "ClipGrad", kernelClipGrad},
      {kMpcDomain, "ExtremumGrad", kernelExtremumGrad},
  };
}

} // namespace cpu
} // namespace mpc
