// The compute-type helpers the CPU kernels of several categories share: the
// wider compute type of mixed-precision operands (double as soon as one is
// fp64, else fp32), whole tensors loaded into it and stored back rounding
// once, broadcasting, and the per-element map and gradient loops built on
// them.
#pragma once

#include "kernels/cpu/cpu_util.h"

#include <algorithm>
#include <initializer_list>
#include <type_traits>
#include <vector>

namespace mpc {
namespace cpu {

template <typename A, typename B>
using Wider = decltype(typename A::Compute() * typename B::Compute());

inline void requireSameShape(const Node &node, const Tensor &a, const Tensor &b,
                             const char *what) {
  if (a.dims != b.dims)
    fail(node, "dY of shape ", shapeString(a.dims), " does not match ", what,
         " of shape ", shapeString(b.dims));
}

/// Calls f(float{}) or f(double{}): the compute type for floating operands
/// of the given dtypes (double as soon as one is fp64).
template <typename F>
void withCompute(const Node &node, std::initializer_list<const Tensor *> ts,
                 F &&f) {
  bool f64 = false;
  for (const Tensor *t : ts) {
    if (!t)
      continue;
    if (!isFloating(t->dtype))
      fail(node, "expects floating-point operands, got ", dtypeName(t->dtype));
    f64 = f64 || t->dtype == DType::F64;
  }
  if (f64)
    f(double{});
  else
    f(float{});
}

/// Every element of a floating tensor in the compute type C.
template <typename C> std::vector<C> loadAll(const Tensor &t) {
  std::vector<C> v(size_t(t.numel()));
  int64_t n = int64_t(v.size());
  if constexpr (std::is_same_v<C, float>) {
    if (t.dtype == DType::F32) {
      loadRun<F32Io>(t.data<float>(), n, v.data());
      return v;
    }
    if (t.dtype == DType::F16) {
      loadRun<F16Io>(t.data<uint16_t>(), n, v.data());
      return v;
    }
  }
  if (t.dtype == DType::F64) {
    const double *p = t.data<double>();
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = C(p[i]);
  } else {
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = C(loadFloat(t, int64_t(i)));
  }
  return v;
}

/// Stores compute-type values into a floating tensor, rounding once.
template <typename C> void storeAll(Tensor &t, const std::vector<C> &v) {
  int64_t n = int64_t(v.size());
  if constexpr (std::is_same_v<C, float>) {
    if (t.dtype == DType::F32)
      return storeRun<F32Io>(t.data<float>(), n, v.data());
    if (t.dtype == DType::F16)
      return storeRun<F16Io>(t.data<uint16_t>(), n, v.data());
  }
  for (int64_t k = 0; k < n; ++k) {
    C x = v[size_t(k)];
    switch (t.dtype) {
    case DType::F64:
      t.data<double>()[k] = double(x);
      break;
    case DType::F32:
      t.data<float>()[k] = float(x);
      break;
    case DType::F16:
      t.data<uint16_t>()[k] = floatToHalf(float(x));
      break;
    default: // BF16: callers only pass floating tensors
      t.data<uint16_t>()[k] = floatToBf16(float(x));
      break;
    }
  }
}

/// `v` (of shape `from`, which must broadcast to `to`) expanded to shape
/// `to`, row-major.
template <typename C>
std::vector<C> broadcastTo(const std::vector<C> &v,
                           const std::vector<int64_t> &from,
                           const std::vector<int64_t> &to) {
  std::vector<C> out(size_t(elementCount(to)));
  const std::vector<int64_t> shapes[1] = {from};
  forEachBroadcast(to, shapes, [&](int64_t i, const int64_t *o) {
    out[size_t(i)] = v[size_t(o[0])];
  });
  return out;
}

/// y = op(x) for a floating x, same dtype. fp16/bf16 are widened and
/// rounded a block at a time (loadRun/storeRun: F16C where the CPU has it,
/// the same bits as element by element), not one element per call.
template <typename Op> void floatMap(KernelContext &ctx, Op op) {
  const Tensor &x = input(ctx, 0, "X");
  Tensor &y = output(ctx, 0, x.dtype, x.dims);
  dispatchFloat(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    const auto *px = ptr<Io>(x);
    auto *py = ptr<Io>(y);
    int64_t n = x.numel();
    if constexpr (std::is_same_v<typename Io::Storage, C>) {
      for (int64_t i = 0; i < n; ++i)
        py[i] = C(op(px[i]));
    } else {
      constexpr int64_t kBlock = 1024;
      C block[kBlock];
      for (int64_t i = 0; i < n; i += kBlock) {
        int64_t len = std::min(kBlock, n - i);
        loadRun<Io>(px + i, len, block);
        for (int64_t j = 0; j < len; ++j)
          block[j] = C(op(block[j]));
        storeRun<Io>(py + i, len, block);
      }
    }
  });
}

/// fp32, fp16 and bf16 compute in fp32.
inline bool isFloat32Compute(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

/// Elements [i, i + n) of an fp32, fp16 or bf16 tensor as floats.
inline void loadFloats(const Tensor &t, int64_t i, int64_t n, float *dst) {
  if (t.dtype == DType::F16)
    loadRun<F16Io>(t.data<uint16_t>() + i, n, dst);
  else if (t.dtype == DType::BF16)
    loadRun<BF16Io>(t.data<uint16_t>() + i, n, dst);
  else
    loadRun<F32Io>(t.data<float>() + i, n, dst);
}

/// Stores floats as elements [i, i + n) of such a tensor, rounding once.
inline void storeFloats(Tensor &t, int64_t i, int64_t n, const float *src) {
  if (t.dtype == DType::F16)
    storeRun<F16Io>(t.data<uint16_t>() + i, n, src);
  else if (t.dtype == DType::BF16)
    storeRun<BF16Io>(t.data<uint16_t>() + i, n, src);
  else
    storeRun<F32Io>(t.data<float>() + i, n, src);
}

/// dX = dY * f(X) for same-shape dY and X.
template <typename Op> void unaryGrad(KernelContext &ctx, Op op) {
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  if (dy.dims != x.dims)
    fail(ctx.node, "dY of shape ", shapeString(dy.dims),
         " does not match X of shape ", shapeString(x.dims));
  Tensor &dx = overwrittenOutput(ctx, 0, dy.dtype, dy.dims);
  withCompute(ctx.node, {&dy, &x}, [&](auto c) {
    using C = decltype(c);
    if constexpr (std::is_same_v<C, float>) {
      if (dy.dtype == DType::F32 && x.dtype == DType::F32) {
        // No widened copies: element i is read before it is written (dX
        // may be in place over dY or X).
        const float *pg = dy.data<float>(), *px = x.data<float>();
        float *pd = dx.data<float>();
        for (int64_t i = 0, n = dy.numel(); i < n; ++i)
          pd[i] = op(pg[i], px[i]);
        return;
      }
    }
    std::vector<C> g = loadAll<C>(dy), xv = loadAll<C>(x);
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = op(g[i], xv[i]);
    storeAll(dx, g);
  });
}

} // namespace cpu
} // namespace mpc
