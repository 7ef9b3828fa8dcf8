// Elementwise CPU kernels: arithmetic, comparisons, activations, Cast, Where.
//
// Binary ops broadcast numpy-style. Floating ops load every element into
// fp32 (fp64 for fp64 tensors), compute there and round once on store, which
// is what the GPU's fp16/bf16 kernels do; integer ops compute exactly in
// their own type (fold-constants runs shape arithmetic through them).
// Integer division and modulo by zero are errors, not traps.
#include "ir/round_to_odd.h"
#include "kernels/cpu/cpu_util.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace mpc {
namespace cpu {
namespace {

// --- shared loops ------------------------------------------------------------

/// Elements per block of the floating loops below: operands are widened into
/// fp32 (fp64) blocks of this size, the op runs over whole blocks, and the
/// result is rounded back in one call.
constexpr int64_t kBlock = 512;

/// The n elements of a run starting at p with the given step, in the
/// compute type: p itself where the storage is already that type and the
/// run is contiguous, else widened into buf.
template <typename Io>
const typename Io::Compute *runValues(const typename Io::Storage *p,
                                      int64_t step, int64_t n,
                                      typename Io::Compute *buf) {
  using C = typename Io::Compute;
  if (step == 1) {
    if constexpr (std::is_same_v<typename Io::Storage, C>)
      return p;
    loadRun<Io>(p, n, buf);
  } else if (step == 0) {
    C v = Io::load(p, 0);
    for (int64_t j = 0; j < n; ++j)
      buf[j] = v;
  } else {
    for (int64_t j = 0; j < n; ++j)
      buf[j] = Io::load(p, j * step);
  }
  return buf;
}

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

/// y = op(x), same dtype.
template <typename Io, typename Op> void unaryLoop(KernelContext &ctx, Op op) {
  const Tensor &x = input(ctx, 0, "X");
  Tensor &y = overwrittenOutput(ctx, 0, x.dtype, x.dims);
  const auto *px = ptr<Io>(x);
  auto *py = ptr<Io>(y);
  int64_t n = x.numel();
  using C = typename Io::Compute;
  if constexpr (std::is_floating_point_v<C>) {
    C bufX[kBlock], bufY[kBlock]; // as in binaryLoop
    for (int64_t c = 0; c < n; c += kBlock) {
      int64_t m = std::min(kBlock, n - c);
      const C *vx = runValues<Io>(px + c, 1, m, bufX);
      C *dst = std::is_same_v<typename Io::Storage, C>
                   ? reinterpret_cast<C *>(py + c)
                   : bufY;
      for (int64_t j = 0; j < m; ++j)
        dst[j] = op(vx[j]);
      if (dst == bufY)
        storeRun<Io>(py + c, m, bufY);
    }
  } else {
    for (int64_t i = 0; i < n; ++i)
      Io::store(py, i, op(Io::load(px, i)));
  }
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

template <typename Op> void floatUnary(KernelContext &ctx, Op op) {
  dispatchFloat(ctx.node, input(ctx, 0, "X").dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    unaryLoop<Io>(ctx, [&](C v) { return C(op(v)); });
  });
}

template <typename Op> void numericUnary(KernelContext &ctx, Op op) {
  dispatchNumeric(ctx.node, input(ctx, 0, "X").dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    unaryLoop<Io>(ctx, [&](C v) { return C(op(v)); });
  });
}

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

void kernelRelu(KernelContext &ctx) {
  // NaN propagates (as PyTorch's relu does); everything else clamps at 0.
  numericUnary(ctx, [](auto v) {
    using T = decltype(v);
    return v > T(0) || v != v ? v : T(0);
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
void kernelTanh(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::tanh(v); });
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
void kernelSigmoid(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) {
    using T = decltype(v);
    return T(1) / (T(1) + std::exp(-v));
  });
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
    floatToHalfN(px, py, n);
    return;
  } else if constexpr (SrcIo::dtype == DType::F16 &&
                       DstIo::dtype == DType::F32) {
    halfToFloatN(px, py, n);
    return;
  } else if constexpr (SrcIo::dtype == DType::F32 &&
                       DstIo::dtype == DType::BF16) {
    floatToBf16N(px, py, n);
    return;
  } else if constexpr (SrcIo::dtype == DType::BF16 &&
                       DstIo::dtype == DType::F32) {
    bf16ToFloatN(px, py, n);
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
      {"", "Relu", kernelRelu},
      {"", "Sqrt", kernelSqrt},
      {"", "Exp", kernelExp},
      {"", "Log", kernelLog},
      {"", "Tanh", kernelTanh},
      {"", "Sigmoid", kernelSigmoid},
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
  };
}

} // namespace cpu
} // namespace mpc
