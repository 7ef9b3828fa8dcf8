// Pooling CPU kernels: MaxPool (with Indices), AveragePool,
// GlobalAveragePool, and the backward ops mpc.MaxPoolGrad and
// mpc.AveragePoolGrad, 1-D to N-D.
//
// Every window is read through windowIndexTable (ir/
// window_geometry.h), the forward and the backward through the same helper,
// so the element MaxPoolGrad routes a gradient to is the element MaxPool
// picked (PyTorch's rule: the first maximum in window order, a NaN wins) and
// AveragePoolGrad divides by the forward's divisor. Sums run in fp32 (fp64
// for fp64) and each result is rounded once.
#include "ir/mpc_ops.h"
#include "kernels/cpu/conv_util.h"

#include <cmath>

namespace mpc {
namespace cpu {
namespace {

/// One pooling problem: N * C planes of S input and P output elements.
struct PoolShape {
  int64_t planes = 0, s = 0, p = 0, k = 0;
  WindowGeometry g;
  std::shared_ptr<const std::vector<int64_t>> table;
};

PoolShape poolShape(const Node &node, const std::vector<int64_t> &xdims) {
  if (xdims.size() < 3)
    fail(node, "X must have rank >= 3 ([N, C, D1, ...]), got shape ",
         shapeString(xdims));
  WindowAttrs a = readWindowAttrs(node, WindowKind::Pool, xdims.size() - 2);
  PoolShape ps;
  ps.g = resolveWindow(node, a, spatialDims(xdims));
  ps.planes = xdims[0] * xdims[1];
  ps.s = ps.g.inCount();
  ps.p = ps.g.outCount();
  ps.k = ps.g.kernelCount();
  ps.table = cachedWindowIndexTable(ps.g);
  return ps;
}

std::vector<int64_t> outputDims(const std::vector<int64_t> &xdims,
                                const WindowGeometry &g) {
  std::vector<int64_t> dims = {xdims[0], xdims[1]};
  dims.insert(dims.end(), g.out.begin(), g.out.end());
  return dims;
}

/// The plane index MaxPool takes for output position p: the first maximum
/// in window order, the first NaN if there is one; -1 when the window holds
/// no element of X. A window of -inf takes its first element, as PyTorch.
template <typename C>
int64_t argmaxWindow(const PoolShape &ps, const C *plane, int64_t p) {
  int64_t best = -1;
  C bestValue = -std::numeric_limits<C>::infinity();
  for (int64_t k = 0; k < ps.k; ++k) {
    int64_t idx = (*ps.table)[size_t(k * ps.p + p)];
    if (idx < 0)
      continue;
    C v = plane[idx];
    if (std::isnan(v))
      return idx;
    if (best < 0 || v > bestValue) {
      best = idx;
      bestValue = v;
    }
  }
  return best;
}

/// AveragePool's divisor of each output position: the window positions on
/// X (count_include_pad = 0) or on X and its pads (= 1); 0 for none.
std::vector<int64_t> windowCounts(const Node &node, const PoolShape &ps) {
  bool includePad = node.attrInt("count_include_pad", 0) != 0;
  std::vector<int64_t> counts(size_t(ps.p), 0);
  for (int64_t k = 0; k < ps.k; ++k)
    for (int64_t p = 0; p < ps.p; ++p) {
      int64_t idx = (*ps.table)[size_t(k * ps.p + p)];
      counts[size_t(p)] += idx >= 0 || (includePad && idx == kInPadding);
    }
  return counts;
}

template <typename C> void runMaxPool(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X");
  PoolShape ps = poolShape(node, x.dims);
  std::vector<int64_t> dims = outputDims(x.dims, ps.g);
  Tensor &y = output(ctx, 0, x.dtype, dims);
  Tensor *indices = optionalOutput(ctx, 1, DType::I64, dims);
  int64_t order = node.attrInt("storage_order", 0);
  if (order != 0 && order != 1)
    fail(node, "attribute 'storage_order' must be 0 or 1, got ", order);
  std::vector<C> xv = widen<C>(node, x, "X");
  std::vector<C> yv(size_t(y.numel()));
  for (int64_t pl = 0; pl < ps.planes; ++pl) {
    const C *plane = xv.data() + pl * ps.s;
    for (int64_t p = 0; p < ps.p; ++p) {
      int64_t idx = argmaxWindow(ps, plane, p);
      yv[size_t(pl * ps.p + p)] =
          idx >= 0 ? plane[idx] : -std::numeric_limits<C>::infinity();
      if (indices) {
        int64_t local = idx;
        if (idx >= 0 && order == 1) {
          // Column-major over the spatial dims: dim 0 varies fastest.
          std::vector<int64_t> coord(ps.g.rank());
          int64_t rest = idx;
          for (size_t d = ps.g.rank(); d-- > 0;) {
            coord[d] = rest % ps.g.in[d];
            rest /= ps.g.in[d];
          }
          local = 0;
          for (size_t d = ps.g.rank(); d-- > 0;)
            local = local * ps.g.in[d] + coord[d];
        }
        indices->data<int64_t>()[pl * ps.p + p] =
            idx >= 0 ? pl * ps.s + local : -1;
      }
    }
  }
  storeAll(node, y, yv);
}

template <typename C> void runMaxPoolGrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  PoolShape ps = poolShape(node, x.dims);
  if (dy.dims != outputDims(x.dims, ps.g))
    fail(node, "dY of shape ", shapeString(dy.dims),
         " is not MaxPool's output for X of shape ", shapeString(x.dims));
  Tensor &dx = output(ctx, 0, dy.dtype, x.dims);
  std::vector<C> xv = widen<C>(node, x, "X"), dyv = widen<C>(node, dy, "dY");
  std::vector<C> dxv(size_t(dx.numel()), C(0));
  for (int64_t pl = 0; pl < ps.planes; ++pl)
    for (int64_t p = 0; p < ps.p; ++p) {
      int64_t idx = argmaxWindow(ps, xv.data() + pl * ps.s, p);
      if (idx >= 0)
        dxv[size_t(pl * ps.s + idx)] += dyv[size_t(pl * ps.p + p)];
    }
  storeAll(node, dx, dxv);
}

template <typename C> void runAveragePool(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X");
  PoolShape ps = poolShape(node, x.dims);
  std::vector<int64_t> counts = windowCounts(node, ps);
  Tensor &y = output(ctx, 0, x.dtype, outputDims(x.dims, ps.g));
  std::vector<C> xv = widen<C>(node, x, "X");
  std::vector<C> yv(size_t(y.numel()), C(0));
  for (int64_t pl = 0; pl < ps.planes; ++pl) {
    const C *plane = xv.data() + pl * ps.s;
    C *out = yv.data() + pl * ps.p;
    for (int64_t k = 0; k < ps.k; ++k)
      for (int64_t p = 0; p < ps.p; ++p) {
        int64_t idx = (*ps.table)[size_t(k * ps.p + p)];
        if (idx >= 0)
          out[p] += plane[idx];
      }
    for (int64_t p = 0; p < ps.p; ++p)
      out[p] = counts[size_t(p)] ? out[p] / C(counts[size_t(p)]) : C(0);
  }
  storeAll(node, y, yv);
}

template <typename C> void runAveragePoolGrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY");
  std::vector<int64_t> xs = readInts(node, input(ctx, 1, "x_shape"), "x_shape");
  checkedCount(node, xs);
  PoolShape ps = poolShape(node, xs);
  if (dy.dims != outputDims(xs, ps.g))
    fail(node, "dY of shape ", shapeString(dy.dims),
         " is not AveragePool's output for x_shape ", shapeString(xs));
  std::vector<int64_t> counts = windowCounts(node, ps);
  Tensor &dx = output(ctx, 0, dy.dtype, xs);
  std::vector<C> dyv = widen<C>(node, dy, "dY");
  std::vector<C> dxv(size_t(dx.numel()), C(0));
  for (int64_t pl = 0; pl < ps.planes; ++pl) {
    const C *g = dyv.data() + pl * ps.p;
    C *plane = dxv.data() + pl * ps.s;
    for (int64_t k = 0; k < ps.k; ++k)
      for (int64_t p = 0; p < ps.p; ++p) {
        int64_t idx = (*ps.table)[size_t(k * ps.p + p)];
        if (idx >= 0)
          plane[idx] += g[p] / C(counts[size_t(p)]);
      }
  }
  storeAll(node, dx, dxv);
}

template <typename C> void runGlobalAveragePool(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X");
  requireWindowRank(node, x, "X");
  std::vector<int64_t> dims = x.dims;
  int64_t s = 1;
  for (size_t d = 2; d < dims.size(); ++d) {
    s *= dims[d];
    dims[d] = 1;
  }
  Tensor &y = output(ctx, 0, x.dtype, dims);
  std::vector<C> xv = widen<C>(node, x, "X");
  std::vector<C> yv(size_t(y.numel()), C(0));
  for (size_t pl = 0; pl < yv.size(); ++pl) {
    C sum = 0;
    for (int64_t i = 0; i < s; ++i)
      sum += xv[pl * size_t(s) + size_t(i)];
    yv[pl] = s ? sum / C(s) : C(0);
  }
  storeAll(node, y, yv);
}

void kernelMaxPool(KernelContext &ctx) {
  byPrecision<runMaxPool<float>, runMaxPool<double>>(ctx);
}
void kernelMaxPoolGrad(KernelContext &ctx) {
  byPrecision<runMaxPoolGrad<float>, runMaxPoolGrad<double>>(ctx);
}
void kernelAveragePool(KernelContext &ctx) {
  byPrecision<runAveragePool<float>, runAveragePool<double>>(ctx);
}
void kernelAveragePoolGrad(KernelContext &ctx) {
  byPrecision<runAveragePoolGrad<float>, runAveragePoolGrad<double>>(ctx);
}
void kernelGlobalAveragePool(KernelContext &ctx) {
  byPrecision<runGlobalAveragePool<float>, runGlobalAveragePool<double>>(ctx);
}

} // namespace

std::vector<KernelEntry> poolKernels() {
  return {
      {"", "MaxPool", kernelMaxPool},
      {"", "AveragePool", kernelAveragePool},
      {"", "GlobalAveragePool", kernelGlobalAveragePool},
      {kMpcDomain, "MaxPoolGrad", kernelMaxPoolGrad},
      {kMpcDomain, "AveragePoolGrad", kernelAveragePoolGrad},
  };
}

} // namespace cpu
} // namespace mpc
