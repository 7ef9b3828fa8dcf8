// The unary loops of the elementwise kernels (elementwise.cpp), which the
// activation kernels (activation.cpp) run too: a block of elements widened
// to the compute type, mapped, and rounded once on store.
#pragma once

#include "kernels/cpu/cpu_util.h"

#include <algorithm>
#include <type_traits>

namespace mpc {
namespace cpu {

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

} // namespace cpu
} // namespace mpc
