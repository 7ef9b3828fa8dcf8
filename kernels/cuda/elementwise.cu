// CUDA elementwise kernels: unary math, Not, broadcasting arithmetic, Pow,
// ReluGrad, broadcast copy.
//
// Each kernel is a grid-stride loop over the output; operands are loaded
// into fp32 and the result rounded once on store (device_io.cuh). Unary
// math, ReluGrad and binary arithmetic whose operands are full-size or a
// single element take the 16-byte vector loops of vector_access.cuh; only
// real broadcasting walks a BroadcastGeometry per element. The fp32
// operations are the CPU kernels' (kernels/cpu/elementwise.cpp): + - * /,
// sqrt and the comparisons are IEEE and give the same bits there; exp, log,
// tanh, erf, pow come from CUDA's math library and differ from glibc's in
// the last ulp or two (tests/backend-ops compares those with a tolerance).
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/vector_access.cuh"

namespace mpc {
namespace cuda {
namespace {

// --- ops ---------------------------------------------------------------------

// NaN propagates (as PyTorch's relu does); everything else clamps at 0.
struct ReluOp {
  __device__ float operator()(float v) const {
    return v > 0.0f || v != v ? v : 0.0f;
  }
};
struct NegOp {
  __device__ float operator()(float v) const { return -v; }
};
struct AbsOp {
  __device__ float operator()(float v) const { return fabsf(v); }
};
struct ExpOp {
  __device__ float operator()(float v) const { return expf(v); }
};
struct LogOp {
  __device__ float operator()(float v) const { return logf(v); }
};
struct SqrtOp {
  __device__ float operator()(float v) const { return sqrtf(v); }
};
struct TanhOp {
  __device__ float operator()(float v) const { return tanhf(v); }
};
struct SigmoidOp {
  __device__ float operator()(float v) const {
    return 1.0f / (1.0f + expf(-v));
  }
};
struct ErfOp {
  __device__ float operator()(float v) const { return erff(v); }
};
struct SinOp {
  __device__ float operator()(float v) const { return sinf(v); }
};
struct CosOp {
  __device__ float operator()(float v) const { return cosf(v); }
};
struct FloorOp {
  __device__ float operator()(float v) const { return floorf(v); }
};
struct CeilOp {
  __device__ float operator()(float v) const { return ceilf(v); }
};
/// Half to even, as ONNX's Round and the CPU kernel's nearbyint.
struct RoundOp {
  __device__ float operator()(float v) const { return rintf(v); }
};
/// -1, 0 or 1; NaN stays NaN (the CPU kernel's rule).
struct SignOp {
  __device__ float operator()(float v) const {
    return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v == 0.0f ? 0.0f : v;
  }
};

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct SubOp {
  __device__ float operator()(float a, float b) const { return a - b; }
};
struct MulOp {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct DivOp {
  __device__ float operator()(float a, float b) const { return a / b; }
};

// --- kernels -----------------------------------------------------------------

/// I: the index type (int32_t when the geometry fits32()).
template <typename Io, typename I, typename Op>
__global__ void binaryKernel(const typename Io::Storage *__restrict__ a,
                             const typename Io::Storage *__restrict__ b,
                             typename Io::Storage *__restrict__ y,
                             BroadcastGeometry<2> g, Op op) {
  for (int64_t i = globalIndex(); i < g.count; i += globalStride()) {
    I off[2];
    g.offsetsIn<I>(I(i), off);
    y[i] = Io::fromFloat(op(Io::toFloat(a[off[0]]), Io::toFloat(b[off[1]])));
  }
}

template <typename Io>
__global__ void powScalarKernel(const typename Io::Storage *__restrict__ x,
                                typename Io::Storage *__restrict__ y, int64_t n,
                                PowScalarMode mode, float e) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    float v = Io::toFloat(x[i]), r;
    switch (mode) {
    case PowScalarMode::Square:
      r = v * v;
      break;
    case PowScalarMode::Cube:
      r = v * v * v;
      break;
    case PowScalarMode::Sqrt:
      r = sqrtf(v);
      break;
    case PowScalarMode::RSqrt:
      r = 1.0f / sqrtf(v);
      break;
    case PowScalarMode::Reciprocal:
      r = 1.0f / v;
      break;
    case PowScalarMode::ReciprocalSq:
      r = 1.0f / (v * v);
      break;
    default:
      r = powf(v, e);
      break;
    }
    y[i] = Io::fromFloat(r);
  }
}

/// An exponent element as fp32, the way the CPU kernel reads it
/// (float(double(value))).
__device__ float loadExponent(const void *e, DType t, int64_t i) {
  switch (t) {
  case DType::F16:
    return fromHalfBits(static_cast<const uint16_t *>(e)[i]);
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(e)[i]);
  case DType::I64:
    return float(double(static_cast<const int64_t *>(e)[i]));
  case DType::I32:
    return float(static_cast<const int32_t *>(e)[i]);
  default:
    return static_cast<const float *>(e)[i];
  }
}

template <typename Io>
__global__ void powBroadcastKernel(const typename Io::Storage *__restrict__ x,
                                   const void *__restrict__ e, DType et,
                                   typename Io::Storage *__restrict__ y,
                                   BroadcastGeometry<2> g) {
  for (int64_t i = globalIndex(); i < g.count; i += globalStride()) {
    int64_t off[2];
    g.offsets(i, off);
    y[i] = Io::fromFloat(
        powf(Io::toFloat(x[off[0]]), loadExponent(e, et, off[1])));
  }
}

/// Not on bool bytes, as the CPU's BoolIo reads and writes them.
struct NotOp {
  __device__ uint8_t operator()(uint8_t v) const { return v != 0 ? 0 : 1; }
};

/// ReluGrad's rule on fp32 values: the gradient where the output is
/// positive.
struct ReluGradOp {
  __device__ float operator()(float dy, float y) const {
    return y > 0.0f ? dy : 0.0f;
  }
};

template <typename Io>
__global__ void scaleKernel(typename Io::Storage *y, int64_t n, float factor) {
  for (int64_t i = globalIndex(); i < n; i += globalStride())
    y[i] = Io::fromFloat(factor * Io::toFloat(y[i]));
}

template <typename T, typename I>
__global__ void broadcastCopyKernel(const T *__restrict__ x, T *__restrict__ y,
                                    BroadcastGeometry<1> g) {
  for (int64_t i = globalIndex(); i < g.count; i += globalStride()) {
    I off[1];
    g.offsetsIn<I>(I(i), off);
    y[i] = x[off[0]];
  }
}

template <typename Op>
void unary(DType t, const void *x, void *y, int64_t n, cudaStream_t s, Op op) {
  dispatchDeviceFloat(t, "unary op", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    launchMap(static_cast<const S *>(x), static_cast<S *>(y), n, s,
              FloatMap<Io, Op>{op});
  });
}

template <typename Op>
void binary(DType t, const void *a, const void *b, void *y,
            const BroadcastGeometry<2> &g, cudaStream_t s, Op op) {
  dispatchDeviceFloat(t, "binary op", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    const S *pa = static_cast<const S *>(a), *pb = static_cast<const S *>(b);
    if (g.simple) {
      launchZip(pa, g.full[0], pb, g.full[1], static_cast<S *>(y), g.count, s,
                FloatZip<Io, Io, Io, Op>{op});
      return;
    }
    BroadcastGeometry<2> f = foldAxes(g);
    // A bias: [rows, n] with a row of n, 16 bytes at once.
    bool row[2];
    if (isRowBroadcast(f, row) &&
        launchZipRows(pa, row[0], pb, row[1], static_cast<S *>(y), f.count,
                      f.dims[1], s, FloatZip<Io, Io, Io, Op>{op}))
      return;
    if (f.fits32())
      binaryKernel<Io, int32_t><<<gridFor(f.count), kBlock, 0, s>>>(
          pa, pb, static_cast<S *>(y), f, op);
    else
      binaryKernel<Io, int64_t><<<gridFor(f.count), kBlock, 0, s>>>(
          pa, pb, static_cast<S *>(y), f, op);
    MPC_CUDA_CHECK_LAUNCH("binaryKernel");
  });
}

} // namespace

void launchUnary(UnaryOp op, DType t, const void *x, void *y, int64_t n,
                 cudaStream_t s) {
  if (n == 0)
    return;
  switch (op) {
  case UnaryOp::Relu:
    return unary(t, x, y, n, s, ReluOp{});
  case UnaryOp::Neg:
    return unary(t, x, y, n, s, NegOp{});
  case UnaryOp::Abs:
    return unary(t, x, y, n, s, AbsOp{});
  case UnaryOp::Exp:
    return unary(t, x, y, n, s, ExpOp{});
  case UnaryOp::Log:
    return unary(t, x, y, n, s, LogOp{});
  case UnaryOp::Sqrt:
    return unary(t, x, y, n, s, SqrtOp{});
  case UnaryOp::Tanh:
    return unary(t, x, y, n, s, TanhOp{});
  case UnaryOp::Sigmoid:
    return unary(t, x, y, n, s, SigmoidOp{});
  case UnaryOp::Erf:
    return unary(t, x, y, n, s, ErfOp{});
  case UnaryOp::Sin:
    return unary(t, x, y, n, s, SinOp{});
  case UnaryOp::Cos:
    return unary(t, x, y, n, s, CosOp{});
  case UnaryOp::Floor:
    return unary(t, x, y, n, s, FloorOp{});
  case UnaryOp::Ceil:
    return unary(t, x, y, n, s, CeilOp{});
  case UnaryOp::Round:
    return unary(t, x, y, n, s, RoundOp{});
  case UnaryOp::Sign:
    return unary(t, x, y, n, s, SignOp{});
  }
}

template <typename Io> struct PredicateMap {
  FloatPredicate p;
  bool negative, positive;
  __device__ uint8_t operator()(typename Io::Storage s) const {
    float v = Io::toFloat(s);
    if (p == FloatPredicate::IsNaN)
      return isnan(v) ? 1 : 0;
    return isinf(v) && (v < 0.0f ? negative : positive) ? 1 : 0;
  }
};

void launchFloatPredicate(FloatPredicate p, bool negative, bool positive,
                          DType t, const void *x, uint8_t *y, int64_t n,
                          cudaStream_t s) {
  dispatchDeviceFloat(t, "IsNaN/IsInf", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    launchMap(static_cast<const S *>(x), y, n, s,
              PredicateMap<Io>{p, negative, positive});
  });
}

void launchNot(const uint8_t *x, uint8_t *y, int64_t n, cudaStream_t s) {
  launchMap(x, y, n, s, NotOp{});
}

void launchBinary(BinaryOp op, DType t, const void *a, const void *b, void *y,
                  const BroadcastGeometry<2> &g, cudaStream_t s) {
  if (g.count == 0)
    return;
  switch (op) {
  case BinaryOp::Add:
    return binary(t, a, b, y, g, s, AddOp{});
  case BinaryOp::Sub:
    return binary(t, a, b, y, g, s, SubOp{});
  case BinaryOp::Mul:
    return binary(t, a, b, y, g, s, MulOp{});
  case BinaryOp::Div:
    return binary(t, a, b, y, g, s, DivOp{});
  }
}

void launchPowScalar(DType t, const void *x, void *y, int64_t n,
                     PowScalarMode mode, float exponent, cudaStream_t s) {
  if (n == 0)
    return;
  dispatchDeviceFloat(t, "Pow", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    powScalarKernel<Io><<<gridFor(n), kBlock, 0, s>>>(
        static_cast<const S *>(x), static_cast<S *>(y), n, mode, exponent);
  });
  MPC_CUDA_CHECK_LAUNCH("powScalarKernel");
}

void launchPowBroadcast(DType xt, const void *x, DType yt, const void *e,
                        void *y, const BroadcastGeometry<2> &g,
                        cudaStream_t s) {
  if (g.count == 0)
    return;
  if (yt != DType::F32 && yt != DType::F16 && yt != DType::BF16 &&
      yt != DType::I64 && yt != DType::I32)
    throw Error(std::string("Pow: the cuda kernel takes an fp32, fp16, bf16, "
                            "int64 or int32 exponent, got ") +
                dtypeName(yt));
  dispatchDeviceFloat(xt, "Pow", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    powBroadcastKernel<Io><<<gridFor(g.count), kBlock, 0, s>>>(
        static_cast<const S *>(x), e, yt, static_cast<S *>(y), g);
  });
  MPC_CUDA_CHECK_LAUNCH("powBroadcastKernel");
}

void launchReluGrad(DType gradT, const void *dy, DType fwdT, const void *y,
                    void *dx, int64_t n, cudaStream_t s) {
  if (n == 0)
    return;
  dispatchDeviceFloat(gradT, "ReluGrad", [&](auto gio) {
    dispatchDeviceFloat(fwdT, "ReluGrad", [&](auto fio) {
      using G = decltype(gio);
      using F = decltype(fio);
      using GS = typename G::Storage;
      launchZip(static_cast<const GS *>(dy), true,
                static_cast<const typename F::Storage *>(y), true,
                static_cast<GS *>(dx), n, s, FloatZip<G, F, G, ReluGradOp>{});
    });
  });
}

void launchScale(DType t, void *y, int64_t n, float factor, cudaStream_t s) {
  if (n == 0)
    return;
  dispatchDeviceFloat(t, "scale", [&](auto io) {
    using Io = decltype(io);
    scaleKernel<Io><<<gridFor(n), kBlock, 0, s>>>(
        static_cast<typename Io::Storage *>(y), n, factor);
  });
  MPC_CUDA_CHECK_LAUNCH("scaleKernel");
}

namespace {

template <typename T>
void broadcastCopy(const void *x, void *y, const BroadcastGeometry<1> &g,
                   cudaStream_t s) {
  if (g.fits32())
    broadcastCopyKernel<T, int32_t><<<gridFor(g.count), kBlock, 0, s>>>(
        static_cast<const T *>(x), static_cast<T *>(y), g);
  else
    broadcastCopyKernel<T, int64_t><<<gridFor(g.count), kBlock, 0, s>>>(
        static_cast<const T *>(x), static_cast<T *>(y), g);
}

} // namespace

void launchBroadcastCopy(size_t elementSize, const void *x, void *y,
                         const BroadcastGeometry<1> &geometry, cudaStream_t s) {
  if (geometry.count == 0)
    return;
  dispatchElementSize(elementSize, "broadcast copy", [&](auto e) {
    using T = decltype(e);
    BroadcastGeometry<1> g = foldAxes(geometry);
    // Wider units, up to 16 bytes, where the innermost axis allows it.
    int64_t unit = copyUnitElements(g, sizeof(T), uintptr_t(x), uintptr_t(y));
    if (unit == 1)
      return broadcastCopy<T>(x, y, g, s);
    g = inUnits(g, unit);
    switch (sizeof(T) * size_t(unit)) {
    case 2:
      return broadcastCopy<uint16_t>(x, y, g, s);
    case 4:
      return broadcastCopy<uint32_t>(x, y, g, s);
    case 8:
      return broadcastCopy<uint64_t>(x, y, g, s);
    default: // 16
      return broadcastCopy<uint4>(x, y, g, s);
    }
  });
  MPC_CUDA_CHECK_LAUNCH("broadcastCopyKernel");
}

} // namespace cuda
} // namespace mpc
