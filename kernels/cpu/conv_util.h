// Helpers shared by the convolution, pooling and batch-norm CPU kernels.
//
// These kernels read operands whose dtypes may differ (autocast leaves a
// BatchNormalization's fp16 X next to fp32 statistics; a backward op may
// meet an fp32 gradient and an fp16 activation). So each one widens every
// operand once into one compute type, C = double when any operand is fp64
// and float otherwise (fp16/bf16 are storage only, as on the GPU), works in
// C, and rounds each result once into its own dtype when storing it.
#pragma once

#include "ir/window_geometry.h"
#include "kernels/cpu/cpu_util.h"

#include "kernels/cpu/blas.h"

#include <type_traits>
#include <vector>

namespace mpc {
namespace cpu {

/// Runs Double(ctx) when a floating input is fp64, else Float(ctx): the
/// compute type of the kernel.
template <void (*Float)(KernelContext &), void (*Double)(KernelContext &)>
void byPrecision(KernelContext &ctx) {
  bool wide = false;
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    wide |= ctx.hasInput(i) && ctx.in(i).dtype == DType::F64;
  (wide ? Double : Float)(ctx);
}

/// The elements of a floating tensor widened (or, for fp64 into float,
/// rounded) to C.
template <typename C>
std::vector<C> widen(const Node &node, const Tensor &t, const char *what) {
  if (!isFloating(t.dtype))
    fail(node, what, " must be floating point, got ", dtypeName(t.dtype));
  std::vector<C> out(size_t(t.numel()));
  dispatchFloat(node, t.dtype, [&](auto io) {
    using Io = decltype(io);
    const auto *p = ptr<Io>(t);
    if constexpr (std::is_same_v<typename Io::Compute, C>) {
      loadRun<Io>(p, int64_t(out.size()), out.data()); // whole buffer at once
    } else {
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = C(Io::load(p, int64_t(i)));
    }
  });
  return out;
}

/// Stores compute-type values into an allocated output, rounding once to its
/// dtype (round-to-nearest-even for fp16/bf16).
template <typename C>
void storeAll(const Node &node, Tensor &out, const std::vector<C> &v) {
  dispatchFloat(node, out.dtype, [&](auto io) {
    using Io = decltype(io);
    auto *p = ptr<Io>(out);
    if constexpr (std::is_same_v<typename Io::Compute, C>) {
      storeRun<Io>(p, int64_t(v.size()), v.data()); // whole buffer at once
    } else {
      for (size_t i = 0; i < v.size(); ++i)
        Io::store(p, int64_t(i), typename Io::Compute(v[i]));
    }
  });
}

/// The dtype whose elements are C (fp32 for float, fp64 for double).
template <typename C>
constexpr DType kComputeDType =
    std::is_same_v<C, double> ? DType::F64 : DType::F32;

/// A floating tensor's elements as C: its own memory when its dtype is C's
/// (no copy, no fresh pages to fault in), else widened into `storage`.
template <typename C>
const C *elementsAs(const Node &node, const Tensor &t, const char *what,
                    std::vector<C> &storage) {
  if (t.dtype == kComputeDType<C>)
    return t.data<C>();
  storage = widen<C>(node, t, what);
  return storage.data();
}

/// Where a kernel writes its C results for `out`: out's own memory when its
/// dtype is C's, else `storage` (zeros), which storeResults then rounds
/// into out. Only for outputs that never share an input's buffer (the
/// memory plan writes in place only over elementwise ops' inputs).
template <typename C> C *resultsFor(Tensor &out, std::vector<C> &storage) {
  if (out.dtype == kComputeDType<C>)
    return out.data<C>();
  storage.assign(size_t(out.numel()), C(0));
  return storage.data();
}

/// Rounds the results resultsFor put in `storage` into `out` (nothing to do
/// when they went straight into it).
template <typename C>
void storeResults(const Node &node, Tensor &out,
                  const std::vector<C> &storage) {
  if (out.dtype != kComputeDType<C>)
    storeAll(node, out, storage);
}

/// Spatial dims (2...) of a shape.
inline std::vector<int64_t> spatialDims(const std::vector<int64_t> &dims) {
  return std::vector<int64_t>(dims.begin() + 2, dims.end());
}

/// Requires a [N, C, D1...] tensor (rank >= 3).
inline void requireWindowRank(const Node &node, const Tensor &t,
                              const char *what) {
  if (t.dims.size() < 3)
    fail(node, what, " must have rank >= 3 ([N, C, D1, ...]), got shape ",
         shapeString(t.dims));
}

/// Requires a gradient's spatial dims to be the window's output sizes.
inline void requireWindowOutput(const Node &node, const WindowGeometry &g,
                                const Tensor &dy) {
  if (spatialDims(dy.dims) != g.out)
    fail(node, "dY of shape ", shapeString(dy.dims),
         " does not have the window's output size ", shapeString(g.out));
}

/// BLAS takes int dimensions; refuse sizes beyond them.
inline void requireBlasSize(const Node &node, int64_t v) {
  if (v > int64_t(std::numeric_limits<int>::max()))
    fail(node, "dimension ", v, " is too large for BLAS");
}

} // namespace cpu
} // namespace mpc
