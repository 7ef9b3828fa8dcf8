// Convolution and pooling CPU kernels, 1-D to N-D: Conv, ConvTranspose,
// mpc.ConvGradInput and mpc.ConvGradWeight (with groups, on OpenBLAS);
// MaxPool (with Indices), AveragePool, GlobalAveragePool and the backward
// ops mpc.MaxPoolGrad and mpc.AveragePoolGrad.
//
// Conv, mpc.ConvGradInput and mpc.ConvGradWeight whose operands are all
// bf16 or all fp32, with 1 to 3 spatial dims, run on oneDNN's convolutions
// (kernels/cpu/onednn.h: fp32 accumulation, one rounding); the rest, and
// those under MPC_CPU_EXACT_HALF=1 (bf16) or MPC_CPU_ONEDNN=0, below.
//
// Every kernel below is an im2col product. The window (ir/window_geometry.h)
// gives, per kernel offset and output position, the input element it reads;
// gathering those into a [C/group * K, P] column matrix turns Conv into one
// GEMM per (image, group) and its weight gradient into one accumulating GEMM.
// The data gradient (ConvGradInput) and ConvTranspose are the same transposed
// product W^T x dY scattered back through the window (col2im). Operands are
// widened to fp32 (fp64 for fp64) and each result is rounded once: the
// Tensor Core numerics of cuDNN with an fp32 compute type.
//
// Every window is read through windowIndexTable (ir/
// window_geometry.h), the forward and the backward through the same helper,
// so the element MaxPoolGrad routes a gradient to is the element MaxPool
// picked (PyTorch's rule: the first maximum in window order, a NaN wins) and
// AveragePoolGrad divides by the forward's divisor. Sums run in fp32 (fp64
// for fp64) and each result is rounded once.
#include "ir/mpc_ops.h"
#include "kernels/cpu/conv_geometry.h"
#include "kernels/cpu/conv_util.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <cmath>

namespace mpc {
namespace cpu {

namespace {

/// Shapes of one convolution seen as GEMMs: per image and group, Y[Mg, P] =
/// W[Mg, Cg * K] x col[Cg * K, P], where col gathers the input plane of S
/// elements through `table`.
struct ConvShape {
  int64_t n = 0, groups = 1, cg = 0, mg = 0;
  int64_t k = 0, p = 0, s = 0;
  std::shared_ptr<const std::vector<int64_t>> table;
  /// The table as runs, per kernel offset: output positions [p, p + len)
  /// read input elements [src, src + len) (src < 0: padding, zeros). A
  /// stride-1 window has a run per output row and border; im2col and col2im
  /// then copy and add whole runs. Empty when the runs are too short to pay
  /// (strided windows), and the element loops read the table.
  struct Run {
    int64_t p, len, src;
  };
  std::vector<std::vector<Run>> runs;
};

/// ConvShape::runs from the table, or none when they average under 4
/// elements.
std::vector<std::vector<ConvShape::Run>> windowRuns(const ConvShape &cs) {
  std::vector<std::vector<ConvShape::Run>> runs(size_t(cs.k));
  const int64_t *table = cs.table->data();
  int64_t count = 0;
  for (int64_t k = 0; k < cs.k; ++k) {
    const int64_t *idx = table + k * cs.p;
    for (int64_t p = 0; p < cs.p;) {
      int64_t start = p, src = idx[p] >= 0 ? idx[p] : -1;
      ++p;
      while (p < cs.p && (src < 0 ? idx[p] < 0 : idx[p] == src + (p - start)))
        ++p;
      runs[size_t(k)].push_back({start, p - start, src});
      ++count;
    }
  }
  if (count * 4 > cs.k * cs.p)
    runs.clear();
  return runs;
}

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
  cs.table = cachedWindowIndexTable(g);
  cs.runs = windowRuns(cs);
  return cs;
}

/// col[(c * K + k) * P + p] = x[c * S + table[k * P + p]] (0 in padding).
template <typename C>
void im2col(const ConvShape &cs, const C *x, std::vector<C> &col) {
  // Locals with __restrict: the row, the table and the plane never overlap,
  // and the compiler otherwise reloads every pointer on each element.
  const int64_t count = cs.p;
  const int64_t *table = cs.table->data();
  C *out = col.data();
  for (int64_t c = 0; c < cs.cg; ++c)
    for (int64_t k = 0; k < cs.k; ++k) {
      C *__restrict row = out + (c * cs.k + k) * count;
      const C *__restrict plane = x + c * cs.s;
      if (!cs.runs.empty()) {
        for (const ConvShape::Run &r : cs.runs[size_t(k)])
          if (r.src < 0)
            std::fill(row + r.p, row + r.p + r.len, C(0));
          else
            std::copy(plane + r.src, plane + r.src + r.len, row + r.p);
        continue;
      }
      const int64_t *__restrict idx = table + k * count;
      for (int64_t p = 0; p < count; ++p) {
        int64_t i = idx[p];
        row[p] = i >= 0 ? plane[i] : C(0);
      }
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
      const int64_t count = cs.p;
      const int64_t *table = cs.table->data();
      for (int64_t c = 0; c < cs.cg; ++c)
        for (int64_t k = 0; k < cs.k; ++k) {
          const C *__restrict row = col.data() + (c * cs.k + k) * count;
          C *__restrict plane = dst + c * cs.s;
          if (!cs.runs.empty()) {
            // The same adds in the same order as the element loop: runs
            // in p order, each element of a run in order.
            for (const ConvShape::Run &r : cs.runs[size_t(k)])
              if (r.src >= 0)
                for (int64_t j = 0; j < r.len; ++j)
                  plane[r.src + j] += row[r.p + j];
            continue;
          }
          const int64_t *__restrict idx = table + k * count;
          for (int64_t p = 0; p < count; ++p) {
            int64_t i = idx[p];
            if (i >= 0)
              plane[i] += row[p];
          }
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

/// The geometry of a convolution node in oneDNN's problem form (the dtype
/// is the caller's: native or widened).
void setConvGeometry(const ConvNodeGeometry &k, onednn::ConvProblem &p) {
  p.n = k.batch;
  p.c = k.c;
  p.m = k.m;
  p.groups = k.attrs.group;
  p.in = k.window.in;
  p.out = k.window.out;
  p.kernel = k.window.kernel;
  p.strides = k.window.strides;
  p.dilations = k.window.dilations;
  p.padBegin = k.window.padBegin;
}

/// The oneDNN problem of a node's geometry, when oneDNN should run it: its
/// operands (`tensors`, null ones skipped) share one dtype that
/// onednn::useFor takes, and no tensor is empty.
bool nativeProblem(const ConvNodeGeometry &k,
                   std::initializer_list<const Tensor *> tensors,
                   onednn::ConvProblem &p) {
  DType t = (*tensors.begin())->dtype;
  for (const Tensor *x : tensors)
    if (x && (x->dtype != t || x->numel() == 0))
      return false;
  if (!onednn::useFor(onednn::Family::Conv, t))
    return false;
  p.dtype = t;
  setConvGeometry(k, p);
  return true;
}

/// The fp32 problem of a half convolution whose operands the caller widens
/// (fp16: oneDNN 2.6 has no native kernels), when onednn::useForWidened
/// says oneDNN's fp32 kernels should run it; C is the widened type.
template <typename C>
bool widenedProblem(const ConvNodeGeometry &k,
                    std::initializer_list<const Tensor *> tensors,
                    onednn::ConvProblem &p) {
  DType t = (*tensors.begin())->dtype;
  if (!std::is_same_v<C, float> || (t != DType::F16 && t != DType::BF16) ||
      !onednn::useForWidened(onednn::Family::Conv))
    return false;
  for (const Tensor *x : tensors)
    if (x && (x->dtype != t || x->numel() == 0))
      return false;
  p.dtype = DType::F32;
  setConvGeometry(k, p);
  return true;
}

/// The output a native kernel writes every element of (not zeroed first),
/// or null when the memory plan put it over an operand.
Tensor *nativeOutput(KernelContext &ctx, DType t,
                     const std::vector<int64_t> &dims,
                     std::initializer_list<const Tensor *> operands) {
  Tensor &y = overwrittenOutput(ctx, 0, t, dims);
  for (const Tensor *x : operands) {
    const uint8_t *a = x->bytes.data(), *b = y.bytes.data();
    if (x->byteSize() && a < b + y.byteSize() && b < a + x->byteSize())
      return nullptr;
  }
  return &y;
}

template <typename C> void runConv(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X"), &w = input(ctx, 1, "W");
  const Tensor *b = optionalInput(ctx, 2);
  ConvNodeGeometry k = convGeometry(node, x, w, b);
  onednn::ConvProblem np;
  if (nativeProblem(k, {&x, &w, b}, np))
    if (Tensor *y = nativeOutput(ctx, x.dtype, k.outDims, {&x, &w}))
      if (onednn::convForward(np, x.bytes.data(), w.bytes.data(),
                              b ? b->bytes.data() : nullptr, y->bytes.data()))
        return;
  onednn::noteFallback(onednn::Family::Conv, x.dtype);
  ConvShape cs = convShape(node, k.batch, k.c, k.m, k.attrs.group, k.window);
  Tensor &y = output(ctx, 0, x.dtype, k.outDims);
  std::vector<C> xv = widen<C>(node, x, "X"), wv = widen<C>(node, w, "W");
  std::vector<C> yv(size_t(y.numel()));
  std::vector<C> bv = b ? widen<C>(node, *b, "B") : std::vector<C>();
  // fp16: the widened operands on oneDNN's fp32 kernels, rounded once.
  if (widenedProblem<C>(k, {&x, &w, b}, np) &&
      onednn::convForward(np, xv.data(), wv.data(), b ? bv.data() : nullptr,
                          yv.data())) {
    storeAll(node, y, yv);
    return;
  }
  convForward(cs, xv.data(), wv.data(), yv.data());
  if (b)
    addBias(yv, bv, cs.n, k.m, cs.p);
  storeAll(node, y, yv);
}

template <typename C> void runConvTranspose(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X"), &w = input(ctx, 1, "W");
  const Tensor *b = optionalInput(ctx, 2);
  ConvNodeGeometry k = convTransposeGeometry(node, x, w, b);
  // The convolution this is the data gradient of: its input has the
  // ConvTranspose's M channels and output size, its output X's C and size.
  // On oneDNN as mpc.ConvGradInput is (the same numbers); a bias is added
  // after in fp32, so a bf16 one (two roundings) stays on the path below.
  onednn::ConvProblem np;
  if (nativeProblem(k, {&x, &w, b}, np) && (!b || x.dtype == DType::F32)) {
    std::swap(np.c, np.m);
    if (Tensor *y = nativeOutput(ctx, x.dtype, k.outDims, {&x, &w}))
      if (onednn::convBackwardData(np, x.bytes.data(), w.bytes.data(),
                                   y->bytes.data())) {
        if (b) {
          float *py = y->data<float>();
          const float *pb = b->data<float>();
          int64_t plane = elementCount(k.window.in);
          for (int64_t i = 0; i < k.batch * k.m; ++i)
            for (int64_t j = 0; j < plane; ++j)
              py[i * plane + j] += pb[i % k.m];
        }
        return;
      }
  }
  onednn::noteFallback(onednn::Family::Conv, x.dtype);
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
  onednn::ConvProblem np;
  if (nativeProblem(k, {&dy, &w}, np))
    if (Tensor *dx = nativeOutput(ctx, dy.dtype, k.outDims, {&dy, &w}))
      if (onednn::convBackwardData(np, dy.bytes.data(), w.bytes.data(),
                                   dx->bytes.data()))
        return;
  onednn::noteFallback(onednn::Family::Conv, dy.dtype);
  ConvShape cs = convShape(node, k.batch, k.c, k.m, k.attrs.group, k.window);
  Tensor &dx = output(ctx, 0, dy.dtype, k.outDims);
  std::vector<C> dyv = widen<C>(node, dy, "dY"), wv = widen<C>(node, w, "W");
  std::vector<C> dxv(size_t(dx.numel()), C(0));
  if (!(widenedProblem<C>(k, {&dy, &w}, np) &&
        onednn::convBackwardData(np, dyv.data(), wv.data(), dxv.data())))
    convTransposed(cs, dyv.data(), wv.data(), dxv.data());
  storeAll(node, dx, dxv);
}

template <typename C> void runConvGradWeight(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  ConvNodeGeometry k = convGradWeightGeometry(node, dy, x);
  onednn::ConvProblem np;
  if (nativeProblem(k, {&dy, &x}, np))
    if (Tensor *dw = nativeOutput(ctx, dy.dtype, k.outDims, {&dy, &x}))
      if (onednn::convBackwardWeights(np, dy.bytes.data(), x.bytes.data(),
                                      dw->bytes.data()))
        return;
  onednn::noteFallback(onednn::Family::Conv, dy.dtype);
  ConvShape cs = convShape(node, k.batch, k.c, k.m, k.attrs.group, k.window);
  Tensor &dw = output(ctx, 0, dy.dtype, k.outDims);
  std::vector<C> dyv = widen<C>(node, dy, "dY"), xv = widen<C>(node, x, "X");
  std::vector<C> dwv(size_t(dw.numel()), C(0));
  if (!(widenedProblem<C>(k, {&dy, &x}, np) &&
        onednn::convBackwardWeights(np, dyv.data(), xv.data(), dwv.data())))
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

/// Planes per thread at least in the pooling kernels, which compute each
/// [N, C] plane alone (the same bits on any thread count).
int64_t planeGrain(const PoolShape &ps) { return grainFor(ps.p * ps.k); }

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

/// Calls f(p, idx) for every window element idx of X (the plane index) of
/// every output position p: window offset by offset, positions in order
/// within each, the fixed order of AveragePool's sums.
template <typename F> void forEachWindowElement(const PoolShape &ps, F f) {
  for (int64_t k = 0; k < ps.k; ++k)
    for (int64_t p = 0; p < ps.p; ++p) {
      int64_t idx = (*ps.table)[size_t(k * ps.p + p)];
      if (idx >= 0)
        f(p, idx);
    }
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
  std::vector<C> xStorage, yStorage;
  const C *xv = elementsAs<C>(node, x, "X", xStorage);
  C *yv = resultsFor(y, yStorage);
  parallelFor(ps.planes, planeGrain(ps), [&](int64_t pl0, int64_t pl1) {
    for (int64_t pl = pl0; pl < pl1; ++pl) {
      const C *plane = xv + pl * ps.s;
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
  });
  storeResults(node, y, yStorage);
}

template <typename C> void runMaxPoolGrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  PoolShape ps = poolShape(node, x.dims);
  if (dy.dims != outputDims(x.dims, ps.g))
    fail(node, "dY of shape ", shapeString(dy.dims),
         " is not MaxPool's output for X of shape ", shapeString(x.dims));
  Tensor &dx = output(ctx, 0, dy.dtype, x.dims);
  std::vector<C> xStorage, dyStorage, dxStorage;
  const C *xv = elementsAs<C>(node, x, "X", xStorage);
  const C *dyv = elementsAs<C>(node, dy, "dY", dyStorage);
  C *dxv = resultsFor(dx, dxStorage);
  parallelFor(ps.planes, planeGrain(ps), [&](int64_t pl0, int64_t pl1) {
    for (int64_t pl = pl0; pl < pl1; ++pl) {
      C *plane = dxv + pl * ps.s;
      std::fill(plane, plane + ps.s, C(0));
      for (int64_t p = 0; p < ps.p; ++p) {
        int64_t idx = argmaxWindow(ps, xv + pl * ps.s, p);
        if (idx >= 0)
          plane[idx] += dyv[size_t(pl * ps.p + p)];
      }
    }
  });
  storeResults(node, dx, dxStorage);
}

template <typename C> void runAveragePool(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X");
  PoolShape ps = poolShape(node, x.dims);
  std::vector<int64_t> counts = windowCounts(node, ps);
  Tensor &y = output(ctx, 0, x.dtype, outputDims(x.dims, ps.g));
  std::vector<C> xv = widen<C>(node, x, "X");
  std::vector<C> yv(size_t(y.numel()), C(0));
  parallelFor(ps.planes, planeGrain(ps), [&](int64_t pl0, int64_t pl1) {
    for (int64_t pl = pl0; pl < pl1; ++pl) {
      const C *plane = xv.data() + pl * ps.s;
      C *out = yv.data() + pl * ps.p;
      forEachWindowElement(
          ps, [&](int64_t p, int64_t idx) { out[p] += plane[idx]; });
      for (int64_t p = 0; p < ps.p; ++p)
        out[p] = counts[size_t(p)] ? out[p] / C(counts[size_t(p)]) : C(0);
    }
  });
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
  parallelFor(ps.planes, planeGrain(ps), [&](int64_t pl0, int64_t pl1) {
    for (int64_t pl = pl0; pl < pl1; ++pl) {
      const C *g = dyv.data() + pl * ps.p;
      C *plane = dxv.data() + pl * ps.s;
      forEachWindowElement(ps, [&](int64_t p, int64_t idx) {
        plane[idx] += g[p] / C(counts[size_t(p)]);
      });
    }
  });
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

std::vector<KernelEntry> convPoolKernels() {
  return {
      {"", "Conv", kernelConv},
      {"", "ConvTranspose", kernelConvTranspose},
      {kMpcDomain, "ConvGradInput", kernelConvGradInput},
      {kMpcDomain, "ConvGradWeight", kernelConvGradWeight},
      {"", "MaxPool", kernelMaxPool},
      {"", "AveragePool", kernelAveragePool},
      {"", "GlobalAveragePool", kernelGlobalAveragePool},
      {kMpcDomain, "MaxPoolGrad", kernelMaxPoolGrad},
      {kMpcDomain, "AveragePoolGrad", kernelAveragePoolGrad},
  };
}

} // namespace cpu
} // namespace mpc
