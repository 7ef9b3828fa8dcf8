// Convolution CPU kernels: Conv, ConvTranspose, mpc.ConvGradInput and
// mpc.ConvGradWeight, 1-D to N-D, with groups, on OpenBLAS.
//
// Every kernel is an im2col product. The window (passes/ir/window_geometry.h)
// gives, per kernel offset and output position, the input element it reads;
// gathering those into a [C/group * K, P] column matrix turns Conv into one
// GEMM per (image, group) and its weight gradient into one accumulating GEMM.
// The data gradient (ConvGradInput) and ConvTranspose are the same transposed
// product W^T x dY scattered back through the window (col2im). Operands are
// widened to fp32 (fp64 for fp64) and each result is rounded once: the
// Tensor Core numerics of cuDNN with an fp32 compute type.
#include "kernels/cpu/conv_geometry.h"
#include "kernels/cpu/conv_util.h"
#include "passes/ir/mpc_ops.h"

namespace mpc {
namespace cpu {
namespace {

/// Shapes of one convolution seen as GEMMs: per image and group, Y[Mg, P] =
/// W[Mg, Cg * K] x col[Cg * K, P], where col gathers the input plane of S
/// elements through `table`.
struct ConvShape {
  int64_t n = 0, groups = 1, cg = 0, mg = 0;
  int64_t k = 0, p = 0, s = 0;
  std::vector<int64_t> table;
};

ConvShape convShape(const Node &node, int64_t batch, int64_t c, int64_t m,
                    int64_t groups, const WindowGeometry &g) {
  ConvShape cs;
  cs.n = batch;
  cs.groups = groups;
  cs.cg = c / groups;
  cs.mg = m / groups;
  cs.k = g.kernelCount();
  cs.p = g.outCount();
  cs.s = g.inCount();
  for (int64_t v : {cs.cg * cs.k, cs.p, cs.mg})
    requireBlasSize(node, v);
  cs.table = windowIndexTable(g);
  return cs;
}

/// col[(c * K + k) * P + p] = x[c * S + table[k * P + p]] (0 in padding).
template <typename C>
void im2col(const ConvShape &cs, const C *x, std::vector<C> &col) {
  for (int64_t c = 0; c < cs.cg; ++c)
    for (int64_t k = 0; k < cs.k; ++k) {
      C *row = col.data() + (c * cs.k + k) * cs.p;
      const int64_t *idx = cs.table.data() + k * cs.p;
      const C *plane = x + c * cs.s;
      for (int64_t p = 0; p < cs.p; ++p)
        row[p] = idx[p] >= 0 ? plane[idx[p]] : C(0);
    }
}

/// Conv: y[n, g*Mg+m, p] = sum_{c,k} w[g*Mg+m, c, k] * x[n, g*Cg+c, window].
template <typename C>
void convForward(const ConvShape &cs, const C *x, const C *w, C *y) {
  std::vector<C> col(size_t(cs.cg * cs.k * cs.p));
  for (int64_t n = 0; n < cs.n; ++n)
    for (int64_t g = 0; g < cs.groups; ++g) {
      im2col(cs, x + (n * cs.groups + g) * cs.cg * cs.s, col);
      blasGemm<C>(false, false, cs.mg, cs.p, cs.cg * cs.k, C(1),
                  w + g * cs.mg * cs.cg * cs.k, col.data(), C(0),
                  y + (n * cs.groups + g) * cs.mg * cs.p);
    }
}

/// The transposed product: for a [N, groups * Mg, P] input a and weights
/// laid out [groups * Mg, Cg * K], adds W^T a through the window into the
/// zeroed [N, groups * Cg, S] output: Conv's data gradient, and ConvTranspose
/// itself (there W is [C, M/group, k...], i.e. Mg = C/group, Cg = M/group).
template <typename C>
void convTransposed(const ConvShape &cs, const C *a, const C *w, C *out) {
  std::vector<C> col(size_t(cs.cg * cs.k * cs.p));
  for (int64_t n = 0; n < cs.n; ++n)
    for (int64_t g = 0; g < cs.groups; ++g) {
      blasGemm<C>(true, false, cs.cg * cs.k, cs.p, cs.mg, C(1),
                  w + g * cs.mg * cs.cg * cs.k,
                  a + (n * cs.groups + g) * cs.mg * cs.p, C(0), col.data());
      C *dst = out + (n * cs.groups + g) * cs.cg * cs.s;
      for (int64_t c = 0; c < cs.cg; ++c)
        for (int64_t k = 0; k < cs.k; ++k) {
          const C *row = col.data() + (c * cs.k + k) * cs.p;
          const int64_t *idx = cs.table.data() + k * cs.p;
          C *plane = dst + c * cs.s;
          for (int64_t p = 0; p < cs.p; ++p)
            if (idx[p] >= 0)
              plane[idx[p]] += row[p];
        }
    }
}

/// Conv's weight gradient: dw[g*Mg+m, c, k] = sum_{n,p} dy[n, g*Mg+m, p] *
/// col_n[c*K+k, p], accumulated over the batch in C.
template <typename C>
void convWeightGrad(const ConvShape &cs, const C *dy, const C *x, C *dw) {
  std::vector<C> col(size_t(cs.cg * cs.k * cs.p));
  for (int64_t n = 0; n < cs.n; ++n)
    for (int64_t g = 0; g < cs.groups; ++g) {
      im2col(cs, x + (n * cs.groups + g) * cs.cg * cs.s, col);
      blasGemm<C>(false, true, cs.mg, cs.cg * cs.k, cs.p, C(1),
                  dy + (n * cs.groups + g) * cs.mg * cs.p, col.data(), C(1),
                  dw + g * cs.mg * cs.cg * cs.k);
    }
}

/// Adds bias[m] to every position of channel m of a [N, M, P] tensor.
template <typename C>
void addBias(std::vector<C> &y, const std::vector<C> &bias, int64_t n,
             int64_t m, int64_t p) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      C b = bias[size_t(j)];
      C *row = y.data() + (i * m + j) * p;
      for (int64_t q = 0; q < p; ++q)
        row[q] += b;
    }
}

void requireSameDTypes(const KernelContext &ctx, size_t count) {
  for (size_t i = 1; i < count; ++i)
    if (ctx.hasInput(i) && ctx.in(i).dtype != ctx.in(0).dtype)
      fail(ctx.node, "input ", i, " is ", dtypeName(ctx.in(i).dtype),
           " but input 0 is ", dtypeName(ctx.in(0).dtype),
           " (the inputs must have the same type)");
}

template <typename C> void runConv(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X"), &w = input(ctx, 1, "W");
  const Tensor *b = optionalInput(ctx, 2);
  ConvNodeGeometry k = convGeometry(node, x, w, b);
  ConvShape cs = convShape(node, k.batch, k.c, k.m, k.attrs.group, k.window);
  Tensor &y = output(ctx, 0, x.dtype, k.outDims);
  std::vector<C> xv = widen<C>(node, x, "X"), wv = widen<C>(node, w, "W");
  std::vector<C> yv(size_t(y.numel()));
  convForward(cs, xv.data(), wv.data(), yv.data());
  if (b)
    addBias(yv, widen<C>(node, *b, "B"), cs.n, k.m, cs.p);
  storeAll(node, y, yv);
}

template <typename C> void runConvTranspose(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X"), &w = input(ctx, 1, "W");
  const Tensor *b = optionalInput(ctx, 2);
  ConvNodeGeometry k = convTransposeGeometry(node, x, w, b);
  // The convolution this is the data gradient of: its input has the
  // ConvTranspose's M channels and output size, its output X's C and size.
  ConvShape cs = convShape(node, k.batch, k.m, k.c, k.attrs.group, k.window);
  Tensor &y = output(ctx, 0, x.dtype, k.outDims);
  std::vector<C> xv = widen<C>(node, x, "X"), wv = widen<C>(node, w, "W");
  std::vector<C> yv(size_t(y.numel()), C(0));
  convTransposed(cs, xv.data(), wv.data(), yv.data());
  if (b)
    addBias(yv, widen<C>(node, *b, "B"), cs.n, k.m, cs.s);
  storeAll(node, y, yv);
}

template <typename C> void runConvGradInput(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &w = input(ctx, 1, "W");
  std::vector<int64_t> xs = readInts(node, input(ctx, 2, "x_shape"), "x_shape");
  ConvNodeGeometry k = convGradInputGeometry(node, dy, w, xs);
  ConvShape cs = convShape(node, k.batch, k.c, k.m, k.attrs.group, k.window);
  Tensor &dx = output(ctx, 0, dy.dtype, k.outDims);
  std::vector<C> dyv = widen<C>(node, dy, "dY"), wv = widen<C>(node, w, "W");
  std::vector<C> dxv(size_t(dx.numel()), C(0));
  convTransposed(cs, dyv.data(), wv.data(), dxv.data());
  storeAll(node, dx, dxv);
}

template <typename C> void runConvGradWeight(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  ConvNodeGeometry k = convGradWeightGeometry(node, dy, x);
  ConvShape cs = convShape(node, k.batch, k.c, k.m, k.attrs.group, k.window);
  Tensor &dw = output(ctx, 0, dy.dtype, k.outDims);
  std::vector<C> dyv = widen<C>(node, dy, "dY"), xv = widen<C>(node, x, "X");
  std::vector<C> dwv(size_t(dw.numel()), C(0));
  convWeightGrad(cs, dyv.data(), xv.data(), dwv.data());
  storeAll(node, dw, dwv);
}

void kernelConv(KernelContext &ctx) {
  requireSameDTypes(ctx, 3);
  byPrecision<runConv<float>, runConv<double>>(ctx);
}

void kernelConvTranspose(KernelContext &ctx) {
  requireSameDTypes(ctx, 3);
  byPrecision<runConvTranspose<float>, runConvTranspose<double>>(ctx);
}

void kernelConvGradInput(KernelContext &ctx) {
  byPrecision<runConvGradInput<float>, runConvGradInput<double>>(ctx);
}

void kernelConvGradWeight(KernelContext &ctx) {
  byPrecision<runConvGradWeight<float>, runConvGradWeight<double>>(ctx);
}

} // namespace

std::vector<KernelEntry> convKernels() {
  return {
      {"", "Conv", kernelConv},
      {"", "ConvTranspose", kernelConvTranspose},
      {kMpcDomain, "ConvGradInput", kernelConvGradInput},
      {kMpcDomain, "ConvGradWeight", kernelConvGradWeight},
  };
}

} // namespace cpu
} // namespace mpc
