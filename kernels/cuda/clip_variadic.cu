// CUDA kernels of Clip, Max/Min/Sum and their gradients.
//
// Clip is a map, ClipGrad a zip of dY and X: the 16-byte
// vector loops of vector_access.cuh. Max/Min/Sum and ExtremumGrad walk a
// device table of operands, each broadcasting to the output on its own, so
// any number of inputs is one kernel: every output element folds its
// operands in input order in the compute type (the CPU kernel's order) and
// is stored once. Clip, Max, Min and Sum take every numeric dtype the CPU
// kernels take: fp16/bf16 compute in fp32, fp32, fp64 and the integers in
// their own type (SelfDev), as the CPU's Io types do; the rest take fp32,
// fp16 and bf16.
#include "kernels/common/piecewise_math.h"
#include "kernels/cuda/clip_variadic.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/float_map_launch.cuh"
#include "kernels/cuda/vector_access.cuh"

#include <cmath>

namespace mpc {
namespace cuda {
namespace {

/// Storage computed on as itself (fp64 and the integers in Clip, Max, Min
/// and Sum, whose CPU Io types compute in the storage type): the
/// device_io.cuh interface, its fp32 conversions here the identity.
template <typename T> struct SelfDev {
  using Storage = T;
  __device__ static T toFloat(T v) { return v; }
  __device__ static T fromFloat(T v) { return v; }
};

/// dispatchDeviceFloat extended to the numeric dtypes of Clip/Max/Min/Sum.
template <typename F>
void dispatchNumericDev(DType t, const char *what, F &&f) {
  switch (t) {
  case DType::F64:
    return f(SelfDev<double>{});
  case DType::I64:
    return f(SelfDev<int64_t>{});
  case DType::I32:
    return f(SelfDev<int32_t>{});
  case DType::I8:
    return f(SelfDev<int8_t>{});
  case DType::U8:
    return f(SelfDev<uint8_t>{});
  default:
    return dispatchDeviceFloat(t, what, f);
  }
}

/// A bound's value as fp32: its device element, else the host value.
__device__ inline float boundValue(const ClipBound &b) {
  return b.element ? loadAs(b.dtype, b.element, 0) : b.value;
}

/// Clip on storage values of Io; the bounds' device elements have x's
/// dtype (the runner checks), a host bound converts as the CPU's C(value).
template <typename Io> struct ClipMap {
  using S = typename Io::Storage;
  ClipBound lo, hi;
  __device__ S operator()(S s) const {
    using C = decltype(Io::toFloat(s));
    C l = lo.element ? Io::toFloat(*static_cast<const S *>(lo.element))
                     : C(lo.value);
    C h = hi.element ? Io::toFloat(*static_cast<const S *>(hi.element))
                     : C(hi.value);
    return Io::fromFloat(
        clipValue(Io::toFloat(s), lo.present, l, hi.present, h));
  }
};

struct ClipGradOp {
  ClipBound lo, hi;
  __device__ float operator()(float g, float x) const {
    return clipGradValue(g, x, lo.present ? boundValue(lo) : -INFINITY,
                         hi.present ? boundValue(hi) : INFINITY);
  }
};

/// Offset of output element i in operand o.
__device__ inline int64_t operandOffset(const VariadicOperand &o,
                                        const VariadicShape &shape, int64_t i) {
  if (o.full)
    return i;
  int64_t off = 0;
  for (int64_t d = shape.rank - 1; d >= 0; --d) {
    off += (i % shape.dims[d]) * o.strides[d];
    i /= shape.dims[d];
  }
  return off;
}

template <typename Io, VariadicFold F>
__global__ void variadicKernel(const VariadicOperand *__restrict__ ops,
                               int count, typename Io::Storage *__restrict__ y,
                               VariadicShape shape) {
  using S = typename Io::Storage;
  using C = decltype(Io::toFloat(S()));
  for (int64_t i = globalIndex(); i < shape.count; i += globalStride()) {
    C acc = C(0);
    for (int k = 0; k < count; ++k) {
      C v = Io::toFloat(
          static_cast<const S *>(ops[k].data)[operandOffset(ops[k], shape, i)]);
      if (k == 0)
        acc = v;
      else if (F == VariadicFold::Sum)
        acc = sumFold(acc, v);
      else
        acc = extremumFold(F == VariadicFold::Max, acc, v);
    }
    y[i] = Io::fromFloat(acc);
  }
}

template <typename G>
__global__ void extremumGradKernel(const typename G::Storage *__restrict__ dy,
                                   DType fwdT, const void *__restrict__ y,
                                   const VariadicOperand *__restrict__ ops,
                                   int count, int index,
                                   typename G::Storage *__restrict__ dx,
                                   VariadicShape shape) {
  for (int64_t i = globalIndex(); i < shape.count; i += globalStride()) {
    float yv = loadAs(fwdT, y, i), ties = 0;
    bool mine = false;
    for (int k = 0; k < count; ++k) {
      bool eq = loadAs(DType(ops[k].dtype), ops[k].data,
                       operandOffset(ops[k], shape, i)) == yv;
      ties += eq ? 1.0f : 0.0f;
      if (k == index)
        mine = eq;
    }
    dx[i] = G::fromFloat(extremumGradShare(G::toFloat(dy[i]), mine, ties));
  }
}

template <VariadicFold F>
void variadic(DType t, const VariadicOperand *ops, int count, void *y,
              const VariadicShape &shape, cudaStream_t s) {
  dispatchNumericDev(t, "Max/Min/Sum", [&](auto io) {
    using Io = decltype(io);
    variadicKernel<Io, F><<<gridFor(shape.count), kBlock, 0, s>>>(
        ops, count, static_cast<typename Io::Storage *>(y), shape);
  });
  MPC_CUDA_CHECK_LAUNCH("variadicKernel");
}

} // namespace

bool piecewiseNumeric(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
         t == DType::F64 || t == DType::I64 || t == DType::I32 ||
         t == DType::I8 || t == DType::U8;
}

void launchClip(DType t, const void *x, void *y, int64_t n, ClipBound lo,
                ClipBound hi, cudaStream_t s) {
  if (n == 0)
    return;
  dispatchNumericDev(t, "Clip", [&](auto io) {
    using Io = decltype(io);
    using S = typename Io::Storage;
    launchMap(static_cast<const S *>(x), static_cast<S *>(y), n, s,
              ClipMap<Io>{lo, hi});
  });
}

void launchClipGrad(DType gradT, const void *dy, DType fwdT, const void *x,
                    void *dx, int64_t n, ClipBound lo, ClipBound hi,
                    cudaStream_t s) {
  for (const ClipBound &b : {lo, hi})
    if (b.element)
      requireDeviceFloat(b.dtype, "ClipGrad bound");
  gradZip(gradT, dy, fwdT, x, dx, n, s, "ClipGrad", ClipGradOp{lo, hi});
}

VariadicOperand variadicOperand(const void *data, DType t,
                                const std::vector<int64_t> &in,
                                const std::vector<int64_t> &out) {
  const std::vector<int64_t> shapes[1] = {in};
  BroadcastGeometry<1> g = makeBroadcastGeometry<1>(out, shapes);
  VariadicOperand o;
  o.data = data;
  o.dtype = int64_t(t);
  o.full = g.simple && g.full[0] ? 1 : 0;
  for (int d = 0; d < g.rank; ++d)
    o.strides[d] = g.strides[0][d];
  return o;
}

VariadicShape makeVariadicShape(const std::vector<int64_t> &out) {
  if (out.size() > size_t(kMaxKernelRank))
    throw std::length_error("rank above the cuda kernels' limit");
  VariadicShape s;
  s.rank = int64_t(out.size());
  s.count = 1;
  for (size_t d = 0; d < out.size(); ++d) {
    s.dims[d] = out[d];
    s.count *= out[d];
  }
  return s;
}

void launchVariadic(VariadicFold fold, DType t, const VariadicOperand *ops,
                    int count, void *y, const VariadicShape &shape,
                    cudaStream_t s) {
  if (shape.count == 0)
    return;
  switch (fold) {
  case VariadicFold::Max:
    return variadic<VariadicFold::Max>(t, ops, count, y, shape, s);
  case VariadicFold::Min:
    return variadic<VariadicFold::Min>(t, ops, count, y, shape, s);
  case VariadicFold::Sum:
    return variadic<VariadicFold::Sum>(t, ops, count, y, shape, s);
  }
}

void launchExtremumGrad(DType gradT, const void *dy, DType fwdT, const void *y,
                        const VariadicOperand *ops, int count, int index,
                        void *dx, const VariadicShape &shape, cudaStream_t s) {
  if (shape.count == 0)
    return;
  requireDeviceFloat(fwdT, "ExtremumGrad");
  dispatchDeviceFloat(gradT, "ExtremumGrad", [&](auto gio) {
    using G = decltype(gio);
    using GS = typename G::Storage;
    extremumGradKernel<G><<<gridFor(shape.count), kBlock, 0, s>>>(
        static_cast<const GS *>(dy), fwdT, y, ops, count, index,
        static_cast<GS *>(dx), shape);
  });
  MPC_CUDA_CHECK_LAUNCH("extremumGradKernel");
}

} // namespace cuda
} // namespace mpc
