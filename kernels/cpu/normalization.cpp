// Normalization CPU kernels: BatchNormalization, LayerNormalization and
// mpc.RMSNormalization (the same without centering), and their mpc.*Grad
// backward ops.
//
// BatchNormalization's semantics are those of ir/mpc_ops.h: training mode
// normalises with the batch mean and biased variance and updates the running
// statistics with the unbiased variance (PyTorch's rule); inference mode uses
// the mean and var inputs. X may have another dtype than scale/B/mean/var
// (fp16 X with fp32 statistics): everything is computed in fp32 (fp64 when an
// operand is fp64), Y is rounded once to X's dtype and the running statistics
// to their own. The backward recomputes the batch statistics with the very
// function the forward used, so both see bit-identical mean and variance.
//
// Layer-norm statistics (and dScale, dBias) accumulate in the compute type,
// never in fp16.
//
// Numerics as everywhere in kernels/cpu: fp16/bf16 are storage types, each
// element is computed on in fp32 and rounded to nearest-even once when
// stored; fp64 computes in double, which the float64 finite-difference
// checks of the gradient rules rely on. Every sum accumulates in that
// compute type, never in fp16. The backward kernels may see operands of
// different precisions (autocast can leave an fp32 gradient meeting an fp16
// activation): they compute in double when any operand is fp64, else in
// fp32, and store in dY's dtype (compute_support.h).
#include "ir/batch_norm_mode.h"
#include "ir/mpc_ops.h"
#include "kernels/common/chunked_sum.h"
#include "kernels/common/lane_sum.h"
#include "kernels/common/layer_norm_math.h"
#include "kernels/cpu/compute_support.h"
#include "kernels/cpu/conv_util.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>

namespace mpc {
namespace cpu {

namespace {

/// A [C] per-channel input, widened.
template <typename C>
std::vector<C> channelVector(const KernelContext &ctx, size_t i,
                             const char *what, int64_t channels) {
  const Tensor &t = input(ctx, i, what);
  if (t.dims.size() != 1 || t.dims[0] != channels)
    fail(ctx.node, what, " of shape ", shapeString(t.dims), " must be [",
         channels, "] (one entry per channel)");
  return widen<C>(ctx.node, t, what);
}

/// Lanes of a channel's double sums: term i of each of the channel's rows
/// goes to lane i % 8, and the lanes are joined pairwise. Eight independent
/// chains of adds (the compiler keeps them in vector registers) where one
/// dependent chain took four cycles a term; a fixed order, so the same bits
/// on any thread count.
constexpr int kSumLanes = 8;

/// The sum in double of term(k) over the offsets k of channel c's values.
template <typename Term>
double channelSum(const ChannelLayout &l, int64_t c, Term term) {
  double acc[kSumLanes] = {};
  for (int64_t n = 0; n < l.n; ++n) {
    const int64_t base = (n * l.c + c) * l.inner;
    int64_t i = 0;
    for (; i + kSumLanes <= l.inner; i += kSumLanes)
      for (int j = 0; j < kSumLanes; ++j)
        acc[j] += term(base + i + j);
    for (int j = 0; i < l.inner; ++i, ++j)
      acc[j] += term(base + i);
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// Batch mean and biased variance of every channel: two passes (mean, then
/// the mean of squared deviations), summed in double whatever C is (a
/// channel of a 112 x 112 map at batch 2 is 25,088 terms, where an fp32
/// running sum drifts by 1e-6 relative: PyTorch's and onnxruntime's
/// statistics do not), rounded to C once; channels in parallel, each alone.
/// Forward and backward both call this, so they agree bit for bit.
template <typename C>
void batchStatistics(const ChannelLayout &l, const C *px, std::vector<C> &mean,
                     std::vector<C> &var) {
  mean.assign(size_t(l.c), C(0));
  var.assign(size_t(l.c), C(0));
  const double count = double(l.count());
  parallelFor(l.c, grainFor(l.count()), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const double m =
          channelSum(l, c, [&](int64_t k) { return double(px[k]); }) / count;
      const double sq = channelSum(l, c, [&](int64_t k) {
        const double d = double(px[k]) - m;
        return d * d;
      });
      mean[size_t(c)] = C(m);
      var[size_t(c)] = C(sq / count);
    }
  });
}

template <typename C>
std::vector<C> inverseStd(const std::vector<C> &var, float epsilon) {
  std::vector<C> inv(var.size());
  for (size_t c = 0; c < var.size(); ++c)
    inv[c] = C(1) / std::sqrt(var[c] + C(epsilon));
  return inv;
}

template <typename C> void runBatchNormalization(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X");
  ChannelLayout l = channelLayout(node, x);
  std::vector<C> scale = channelVector<C>(ctx, 1, "scale", l.c);
  std::vector<C> bias = channelVector<C>(ctx, 2, "B", l.c);
  std::vector<C> inMean = channelVector<C>(ctx, 3, "input_mean", l.c);
  std::vector<C> inVar = channelVector<C>(ctx, 4, "input_var", l.c);
  float epsilon = node.attrFloat("epsilon", 1e-5f);
  bool training = isBatchNormTraining(node);
  std::vector<C> xStorage, yStorage;
  const C *xv = elementsAs<C>(node, x, "X", xStorage);
  std::vector<C> mean = inMean, var = inVar;
  if (training) {
    if (l.count() < 2)
      fail(node,
           "training mode needs more than one value per channel, X "
           "has shape ",
           shapeString(x.dims), " (as in PyTorch)");
    batchStatistics(l, xv, mean, var);
  }
  std::vector<C> inv = inverseStd(var, epsilon);
  Tensor &y = output(ctx, 0, x.dtype, x.dims);
  C *yv = resultsFor(y, yStorage);
  // Planes (one sample's channel) in parallel.
  parallelFor(l.n * l.c, grainFor(l.inner), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const size_t c = size_t(p % l.c), base = size_t(p * l.inner);
      C m = mean[c], k = inv[c] * scale[c];
      C b = bias[c];
      for (int64_t i = 0; i < l.inner; ++i)
        yv[base + size_t(i)] = (xv[base + size_t(i)] - m) * k + b;
    }
  });
  storeResults(node, y, yStorage);
  if (!training)
    return;
  const Tensor &statsType = input(ctx, 3, "input_mean");
  C momentum = C(node.attrFloat("momentum", 0.9f));
  C unbias = C(l.count()) / C(l.count() - 1);
  std::vector<C> runMean(size_t(l.c)), runVar(size_t(l.c));
  for (size_t c = 0; c < size_t(l.c); ++c) {
    runMean[c] = inMean[c] * momentum + mean[c] * (C(1) - momentum);
    runVar[c] = inVar[c] * momentum + var[c] * unbias * (C(1) - momentum);
  }
  const std::vector<C> *outs[] = {&runMean, &runVar, &mean, &var};
  for (size_t i = 1; i < 5; ++i)
    if (Tensor *t = optionalOutput(ctx, i, statsType.dtype, {l.c}))
      storeAll(node, *t, *outs[i - 1]);
}

template <typename C> void runBatchNormalizationGrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  if (dy.dims != x.dims)
    fail(node, "dY of shape ", shapeString(dy.dims), " must have X's shape ",
         shapeString(x.dims));
  ChannelLayout l = channelLayout(node, x);
  std::vector<C> scale = channelVector<C>(ctx, 2, "scale", l.c);
  bool given = ctx.hasInput(3) || ctx.hasInput(4);
  std::vector<C> xStorage, dyStorage, dxStorage;
  const C *xv = elementsAs<C>(node, x, "X", xStorage);
  const C *dyv = elementsAs<C>(node, dy, "dY", dyStorage);
  std::vector<C> mean, var;
  if (given) {
    mean = channelVector<C>(ctx, 3, "mean", l.c);
    var = channelVector<C>(ctx, 4, "var", l.c);
  } else {
    if (l.count() < 2)
      fail(node,
           "batch statistics need more than one value per channel, X "
           "has shape ",
           shapeString(x.dims));
    batchStatistics(l, xv, mean, var);
  }
  std::vector<C> inv = inverseStd(var, node.attrFloat("epsilon", 1e-5f));
  // The two channel sums: with batch statistics in double, as the
  // statistics themselves (batchStatistics), rounded to C once; with given
  // statistics in C, row by row then across the batch, the order the CUDA
  // kernel walks (kernels/cuda/batch_norm_math.h), which matches these
  // bytes (the device's training-mode backward is cuDNN's).
  std::vector<C> sumDy(size_t(l.c), C(0)), sumDyXhat(size_t(l.c), C(0));
  if (given) {
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t c = 0; c < l.c; ++c) {
        size_t base = size_t((n * l.c + c) * l.inner);
        C m = mean[size_t(c)], k = inv[size_t(c)], s1 = 0, s2 = 0;
        for (int64_t i = 0; i < l.inner; ++i) {
          C g = dyv[base + size_t(i)];
          s1 += g;
          s2 += g * (xv[base + size_t(i)] - m) * k;
        }
        sumDy[size_t(c)] += s1;
        sumDyXhat[size_t(c)] += s2;
      }
  } else {
    parallelFor(l.c, grainFor(l.count()), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const C m = mean[size_t(c)], k = inv[size_t(c)];
        sumDy[size_t(c)] =
            C(channelSum(l, c, [&](int64_t e) { return double(dyv[e]); }));
        sumDyXhat[size_t(c)] = C(channelSum(l, c, [&](int64_t e) {
          return double(dyv[e]) * double((xv[e] - m) * k);
        }));
      }
    });
  }
  if (Tensor *dx = optionalOutput(ctx, 0, dy.dtype, x.dims)) {
    C *dxv = resultsFor(*dx, dxStorage);
    C count = C(l.count());
    // Planes (one sample's channel) in parallel.
    parallelFor(l.n * l.c, grainFor(l.inner), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const size_t c = size_t(p % l.c), base = size_t(p * l.inner);
        C m = mean[c], k = inv[c];
        C f = scale[c] * k;
        C db = sumDy[c] / count, ds = sumDyXhat[c] / count;
        for (int64_t i = 0; i < l.inner; ++i) {
          C g = dyv[base + size_t(i)];
          if (given) {
            dxv[base + size_t(i)] = f * g;
          } else {
            C xhat = (xv[base + size_t(i)] - m) * k;
            dxv[base + size_t(i)] = f * (g - db - xhat * ds);
          }
        }
      }
    });
    storeResults(node, *dx, dxStorage);
  }
  DType paramType = input(ctx, 2, "scale").dtype;
  if (Tensor *t = optionalOutput(ctx, 1, paramType, {l.c}))
    storeAll(node, *t, sumDyXhat);
  if (Tensor *t = optionalOutput(ctx, 2, paramType, {l.c}))
    storeAll(node, *t, sumDy);
}

void kernelBatchNormalization(KernelContext &ctx) {
  byPrecision<runBatchNormalization<float>, runBatchNormalization<double>>(ctx);
}

void kernelBatchNormalizationGrad(KernelContext &ctx) {
  byPrecision<runBatchNormalizationGrad<float>,
              runBatchNormalizationGrad<double>>(ctx);
}

// LayerNormalization (X, Scale, B) -> (Y, Mean, InvStdDev) and its gradient
// (dY, X, scale, mean, inv_std) -> (dX, dScale, dBias) are `centered`;
// mpc.RMSNormalization (X, Scale) -> Y and its gradient (dY, X, scale) ->
// (dX, dScale) are the same with the mean taken as 0, no bias, and inv_std
// recomputed from X instead of read.

/// Y = (X - mean) * inv_std * scale + bias over the axes [axis, rank), the
/// statistics in fp32 (fp64 for fp64 X) whatever X's storage type; the
/// variance is the biased one (divided by N), as in PyTorch. RMS: mean 0.
void normalizeRows(KernelContext &ctx, bool centered) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X"), &scale = input(ctx, 1, "Scale");
  const Tensor *bias = centered ? optionalInput(ctx, 2) : nullptr;
  if (node.attrInt("stash_type", 1) != 1)
    fail(node, "stash_type ", node.attrInt("stash_type", 1),
         " is not supported (mpc computes layer-norm statistics in fp32)");
  if (scale.dtype != x.dtype || (bias && bias->dtype != x.dtype))
    fail(node, "Scale and B must have X's element type ", dtypeName(x.dtype));
  LayerNormShape s = layerNormShape(node, x);
  requireBroadcastsTo(node, scale, s.norm, "Scale");
  if (bias)
    requireBroadcastsTo(node, *bias, s.norm, "B");
  double eps = node.attrFloat("epsilon", 1e-5f);
  DType statType = x.dtype == DType::F64 ? DType::F64 : DType::F32;
  // mpc.LayerNormalizationTo stores Y in `to` (and Ylow = Cast(Y, low)):
  // the rows are normalised as for X's dtype, then converted as a Cast node
  // converts them (the bits of the Casts fold-widening-casts removed).
  const int lowAt = lowCopyOutput(node.domain(), node.opType());
  const bool to = lowAt > 0; // LayerNormalizationTo, RMSNormalizationTo
  DType yType = to ? floatTypeAttr(node, "to", x.dtype) : x.dtype;
  Tensor *ylow =
      to && ctx.hasOutput(size_t(lowAt)) ? ctx.outputs[size_t(lowAt)] : nullptr;
  DType lowType = ylow ? floatTypeAttr(node, "low", DType::F16) : yType;
  // An fp32 X's rows are narrowed as they are made (Ylow from an fp32 Y);
  // any other pairing is computed whole in X's dtype and cast after.
  auto narrowable = [](DType t) {
    return t == DType::F32 || t == DType::F16 || t == DType::BF16;
  };
  const bool byRow = x.dtype == DType::F32 && narrowable(yType) &&
                     narrowable(lowType) && (!ylow || yType == DType::F32);
  Tensor computed;
  // Every element is written below: no zero fill first.
  Tensor &y = yType == x.dtype || byRow
                  ? overwrittenOutput(ctx, 0, yType, x.dims)
                  : (computed = Tensor(x.dtype, x.dims));
  if (ylow)
    overwrittenOutput(ctx, size_t(lowAt), lowType, x.dims);
  // Row o of an fp32 result into t (fp16/bf16 rounded once, as Cast does).
  auto storeRow = [&](Tensor &t, int64_t o, const float *row) {
    int64_t at = o * s.n;
    if (t.dtype == DType::F16)
      floatToHalfN(row, t.data<uint16_t>() + at, s.n);
    else if (t.dtype == DType::BF16)
      floatToBf16N(row, t.data<uint16_t>() + at, s.n);
    else if (t.data<float>() + at != row)
      std::copy(row, row + s.n, t.data<float>() + at);
  };
  Tensor *meanOut =
      centered ? optionalOutput(ctx, 1, statType, s.stats) : nullptr;
  Tensor *invOut =
      centered ? optionalOutput(ctx, 2, statType, s.stats) : nullptr;
  withCompute(node, {&x}, [&](auto c) {
    using C = decltype(c);
    std::vector<C> sc = broadcastTo(loadAll<C>(scale), scale.dims, s.norm);
    std::vector<C> bi(size_t(s.n), C(0));
    if (bias)
      bi = broadcastTo(loadAll<C>(*bias), bias->dims, s.norm);
    // fp32 rows are read from X and written to Y where they lie (element j
    // of a row is written after the row's statistics and its own read);
    // a narrower Y's rows go through a row buffer; other dtypes go through
    // buffers in the compute type.
    const C *xs = nullptr;
    C *ys = nullptr;
    std::vector<C> xv, yv;
    if constexpr (std::is_same_v<C, float>) {
      if (x.dtype == DType::F32) {
        xs = x.data<float>();
        ys = y.dtype == DType::F32 ? y.data<float>() : nullptr;
      }
    }
    if (!xs) {
      xv = loadAll<C>(x);
      yv.resize(xv.size());
      xs = xv.data();
      ys = yv.data();
    }
    std::vector<C> means(size_t(s.outer)), invs(size_t(s.outer));
    // Rows in parallel (each row alone: the same bits on any thread count).
    parallelFor(s.outer, grainFor(s.n), [&](int64_t o0, int64_t o1) {
      std::vector<C> rowBuf(ys ? 0 : size_t(s.n));
      for (int64_t o = o0; o < o1; ++o) {
        const C *row = xs + o * s.n;
        C *out = ys ? ys + o * s.n : rowBuf.data();
        LayerNormRowStats<C> st = layerNormRowStats<C>(
            s.n, eps, [&](int64_t j) { return row[j]; }, centered);
        for (int64_t j = 0; j < s.n; ++j)
          out[j] = layerNormValue(row[j], st.mean, st.invStd, sc[size_t(j)],
                                  bi[size_t(j)]);
        means[size_t(o)] = st.mean;
        invs[size_t(o)] = st.invStd;
        if constexpr (std::is_same_v<C, float>) {
          if (byRow) {
            storeRow(y, o, out);
            if (ylow)
              storeRow(*ylow, o, out);
          }
        }
      }
    });
    if (!yv.empty())
      storeAll(y, yv);
    if (meanOut)
      storeAll(*meanOut, means);
    if (invOut)
      storeAll(*invOut, invs);
  });
  if (byRow)
    return;
  // Computed whole in X's dtype: Y in `to` and Ylow by the Cast kernel.
  if (yType != x.dtype)
    castWithCastKernel(node, y, yType, ctx.outputs[0], ctx.seed);
  if (ylow)
    castWithCastKernel(node, *ctx.outputs[0], lowType, ylow, ctx.seed);
}

// The To forms (mpc.LayerNormalizationTo, RMSNormalizationTo) run the same
// kernels: normalizeRows tells them by their Ylow output (lowCopyOutput).
void kernelLayerNormalization(KernelContext &ctx) { normalizeRows(ctx, true); }
void kernelRMSNormalization(KernelContext &ctx) { normalizeRows(ctx, false); }

/// One row's terms of the layer-norm gradient: xhat and g * scale, and the
/// row's share of dScale and dBias added to their partial sums. A function
/// of restrict-qualified pointers, so that the loop vectorises.
template <typename C>
void layerNormGradTerms(int64_t n, const C *__restrict g, const C *__restrict x,
                        const C *__restrict scale, C mean, C invStd,
                        C *__restrict xhat, C *__restrict gs,
                        C *__restrict dScale, C *__restrict dBias) {
  for (int64_t j = 0; j < n; ++j) {
    xhat[j] = layerNormXhat(x[j], mean, invStd);
    gs[j] = g[j] * scale[j];
    dScale[j] += g[j] * xhat[j];
    dBias[j] += g[j];
  }
}

void normalizeRowsGrad(KernelContext &ctx, bool centered) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X"),
               &scale = input(ctx, 2, "scale");
  const Tensor *mean = centered ? &input(ctx, 3, "mean") : nullptr;
  const Tensor *inv = centered ? &input(ctx, 4, "inv_std") : nullptr;
  if (dy.dims != x.dims)
    fail(node, "dY of shape ", shapeString(dy.dims), " does not match X of ",
         "shape ", shapeString(x.dims));
  // The results take X's dtype; a narrower dY is widened as it is read.
  if (dy.dtype != x.dtype && !widensExactly(dy.dtype, x.dtype))
    fail(node, "dY must be X's dtype ", dtypeName(x.dtype),
         " or a narrower float, got ", dtypeName(dy.dtype));
  LayerNormShape s = layerNormShape(node, x);
  requireBroadcastsTo(node, scale, s.norm, "scale");
  if (centered && (mean->numel() != s.outer || inv->numel() != s.outer))
    fail(node, "mean and inv_std must hold one value per normalised row (",
         s.outer, "), got shapes ", shapeString(mean->dims), " and ",
         shapeString(inv->dims));
  // Each output is optional: a frozen input's gradient is not computed.
  // dX's every element is written below: no zero fill first.
  Tensor *dx =
      ctx.hasOutput(0) ? &overwrittenOutput(ctx, 0, x.dtype, dy.dims) : nullptr;
  Tensor *dScale = optionalOutput(ctx, 1, x.dtype, s.norm);
  Tensor *dBias = centered ? optionalOutput(ctx, 2, x.dtype, s.norm) : nullptr;
  withCompute(node, {&dy, &x, &scale, inv, mean}, [&](auto c) {
    using C = decltype(c);
    // fp32 dY, X and dX are read and written where they lie (a row of dX
    // is written from the row buffers below, after its dY and X are read);
    // other dtypes go through buffers in the compute type.
    std::vector<C> gBuf, xBuf, dxv;
    const C *g = nullptr, *xv = nullptr;
    C *dxs = nullptr;
    if constexpr (std::is_same_v<C, float>) {
      if (dy.dtype == DType::F32)
        g = dy.data<float>();
      if (x.dtype == DType::F32)
        xv = x.data<float>();
      if (dx && dx->dtype == DType::F32)
        dxs = dx->data<float>();
    }
    if (!g) {
      gBuf = loadAll<C>(dy);
      g = gBuf.data();
    }
    if (!xv) {
      xBuf = loadAll<C>(x);
      xv = xBuf.data();
    }
    if (!dxs) {
      dxv.resize(size_t(dy.numel()));
      dxs = dxv.data();
    }
    std::vector<C> sc = broadcastTo(loadAll<C>(scale), scale.dims, s.norm);
    std::vector<C> mv =
        mean ? loadAll<C>(*mean) : std::vector<C>(size_t(s.outer), C(0));
    std::vector<C> iv;
    if (inv) {
      iv = loadAll<C>(*inv);
    } else { // RMS: the forward's inv_std, recomputed in its order
      double eps = node.attrFloat("epsilon", 1e-5f);
      iv.resize(size_t(s.outer));
      for (int64_t o = 0; o < s.outer; ++o)
        iv[size_t(o)] =
            layerNormRowStats<C>(
                s.n, eps, [&](int64_t j) { return xv[o * s.n + j]; }, false)
                .invStd;
    }
    std::vector<C> ds(size_t(s.n), C(0)), db(size_t(s.n), C(0));
    // dScale and dBias add the rows in chunks of kSumChunk (the GPU's order,
    // kernels/common/chunked_sum.h). The chunks run in parallel, each into
    // its own partial sums, which then join the totals in chunk order: the
    // same bits on any thread count.
    const int64_t chunks = s.outer > 0 ? sumChunks(s.outer) : 0;
    std::vector<std::vector<C>> partDs(static_cast<size_t>(chunks)),
        partDb(static_cast<size_t>(chunks));
    int64_t chunkGrain = std::max<int64_t>(1, grainFor(s.n) / kSumChunk);
    parallelFor(chunks, chunkGrain, [&](int64_t c0, int64_t c1) {
      std::vector<C> xhatBuf(size_t(s.n)), gsBuf(size_t(s.n));
      // Restrict-qualified views: the row loops vectorise only when the
      // compiler may assume the buffers and the rows do not overlap (dX may
      // lie over dY or X, but it is written in its own loop, after them).
      C *__restrict xhat = xhatBuf.data();
      C *__restrict gs = gsBuf.data();
      const C *__restrict scv = sc.data();
      for (int64_t c = c0; c < c1; ++c) {
        partDs[size_t(c)].assign(size_t(s.n), C(0));
        partDb[size_t(c)].assign(size_t(s.n), C(0));
        C *__restrict pds = partDs[size_t(c)].data();
        C *__restrict pdb = partDb[size_t(c)].data();
        for (int64_t o = c * kSumChunk;
             o < std::min(s.outer, (c + 1) * kSumChunk); ++o) {
          const C m = mv[size_t(o)], is = iv[size_t(o)];
          const C *__restrict gRow = g + o * s.n;
          const C *__restrict xRow = xv + o * s.n;
          layerNormGradTerms(s.n, gRow, xRow, scv, m, is, xhat, gs, pds, pdb);
          // The row's two sums in lane_sum.h's lanes (as its statistics).
          C sumG = laneSum<C>(s.n, [&](int64_t j) { return gs[j]; });
          C sumGX = laneSum<C>(s.n, [&](int64_t j) { return gs[j] * xhat[j]; });
          C meanG = centered ? sumG / C(s.n) : C(0), meanGX = sumGX / C(s.n);
          C *dxRow = dxs + o * s.n;
          for (int64_t j = 0; j < s.n; ++j)
            dxRow[j] = layerNormGradInput(is, gs[j], meanG, xhat[j], meanGX);
        }
      }
    });
    for (int64_t c = 0; c < chunks; ++c) {
      addChunkSums(ds, partDs[size_t(c)]);
      addChunkSums(db, partDb[size_t(c)]);
    }
    if (dx && !dxv.empty())
      storeAll(*dx, dxv);
    if (dScale)
      storeAll(*dScale, ds);
    if (dBias)
      storeAll(*dBias, db);
  });
}

void kernelLayerNormalizationGrad(KernelContext &ctx) {
  normalizeRowsGrad(ctx, true);
}
void kernelRMSNormalizationGrad(KernelContext &ctx) {
  normalizeRowsGrad(ctx, false);
}

} // namespace

std::vector<KernelEntry> normalizationKernels() {
  return {
      {"", "BatchNormalization", kernelBatchNormalization},
      {kMpcDomain, "BatchNormalizationGrad", kernelBatchNormalizationGrad},
      {"", "LayerNormalization", kernelLayerNormalization},
      {kMpcDomain, "LayerNormalizationTo", kernelLayerNormalization},
      {kMpcDomain, "LayerNormalizationGrad", kernelLayerNormalizationGrad},
      {kMpcDomain, "RMSNormalization", kernelRMSNormalization},
      {kMpcDomain, "RMSNormalizationTo", kernelRMSNormalization},
      {kMpcDomain, "RMSNormalizationGrad", kernelRMSNormalizationGrad},
  };
}

} // namespace cpu
} // namespace mpc
