// CPU kernels of the transformer and residual-MLP family: LayerNormalization
// (and mpc.RMSNormalization, the same without centering),
// Gelu, LeakyRelu, Clip, Max, Min, Sum, Split, Dropout, CastLike, and the mpc
// backward ops their gradient rules emit (ErfGrad for the Erf form of GELU)
// (semantics in ir/mpc_ops.h).
//
// Numerics as everywhere in kernels/cpu: fp16/bf16 are storage types, each
// element is computed on in fp32 and rounded to nearest-even once when
// stored; fp64 computes in double, which the float64 finite-difference
// checks of the gradient rules rely on. Layer-norm statistics and every sum
// (dScale, dBias, Sum, GatherGrad's scatter-add, the tie counts of the
// Max/Min gradients) accumulate in that compute type, never in fp16. The
// backward kernels may see operands of different precisions (autocast can
// leave an fp32 gradient meeting an fp16 activation): they compute in double
// when any operand is fp64, else in fp32, and store in dY's dtype.
#include "ir/mpc_ops.h"
#include "kernels/common/chunked_sum.h"
#include "kernels/common/dropout_rng.h"
#include "kernels/common/gelu_math.h"
#include "kernels/common/layer_norm_math.h"
#include "kernels/common/piecewise_math.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cpu/vector_math.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace mpc {
namespace cpu {
namespace {

// --- shared helpers ----------------------------------------------------------

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
  // Every element is written below: no zero fill first.
  Tensor &y = overwrittenOutput(ctx, 0, x.dtype, x.dims);
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
    // other dtypes go through buffers in the compute type.
    const C *xs = nullptr;
    C *ys = nullptr;
    std::vector<C> xv, yv;
    if constexpr (std::is_same_v<C, float>) {
      if (x.dtype == DType::F32) {
        xs = x.data<float>();
        ys = y.data<float>();
      }
    }
    if (!xs) {
      xv = loadAll<C>(x);
      yv.resize(xv.size());
      xs = xv.data();
      ys = yv.data();
    }
    std::vector<C> means(size_t(s.outer)), invs(size_t(s.outer));
    for (int64_t o = 0; o < s.outer; ++o) {
      const C *row = xs + o * s.n;
      C *out = ys + o * s.n;
      LayerNormRowStats<C> st = layerNormRowStats<C>(
          s.n, eps, [&](int64_t j) { return row[j]; }, centered);
      for (int64_t j = 0; j < s.n; ++j)
        out[j] = layerNormValue(row[j], st.mean, st.invStd, sc[size_t(j)],
                                bi[size_t(j)]);
      means[size_t(o)] = st.mean;
      invs[size_t(o)] = st.invStd;
    }
    if (!yv.empty())
      storeAll(y, yv);
    if (meanOut)
      storeAll(*meanOut, means);
    if (invOut)
      storeAll(*invOut, invs);
  });
}

void kernelLayerNormalization(KernelContext &ctx) { normalizeRows(ctx, true); }
void kernelRMSNormalization(KernelContext &ctx) { normalizeRows(ctx, false); }

void normalizeRowsGrad(KernelContext &ctx, bool centered) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X"),
               &scale = input(ctx, 2, "scale");
  const Tensor *mean = centered ? &input(ctx, 3, "mean") : nullptr;
  const Tensor *inv = centered ? &input(ctx, 4, "inv_std") : nullptr;
  if (dy.dims != x.dims)
    fail(node, "dY of shape ", shapeString(dy.dims), " does not match X of ",
         "shape ", shapeString(x.dims));
  LayerNormShape s = layerNormShape(node, x);
  requireBroadcastsTo(node, scale, s.norm, "scale");
  if (centered && (mean->numel() != s.outer || inv->numel() != s.outer))
    fail(node, "mean and inv_std must hold one value per normalised row (",
         s.outer, "), got shapes ", shapeString(mean->dims), " and ",
         shapeString(inv->dims));
  // Each output is optional: a frozen input's gradient is not computed.
  // dX's every element is written below: no zero fill first.
  Tensor *dx = ctx.hasOutput(0) ? &overwrittenOutput(ctx, 0, dy.dtype, dy.dims)
                                : nullptr;
  Tensor *dScale = optionalOutput(ctx, 1, dy.dtype, s.norm);
  Tensor *dBias = centered ? optionalOutput(ctx, 2, dy.dtype, s.norm) : nullptr;
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
    std::vector<C> xhat(size_t(s.n)), gs(size_t(s.n));
    // dScale and dBias add the rows in chunks of kSumChunk (the GPU's order,
    // kernels/common/chunked_sum.h): partDs/partDb hold the open chunk's.
    std::vector<C> partDs(size_t(s.n), C(0)), partDb(size_t(s.n), C(0));
    for (int64_t o = 0; o < s.outer; ++o) {
      C m = mv[size_t(o)], is = iv[size_t(o)];
      C sumG = 0, sumGX = 0;
      for (int64_t j = 0; j < s.n; ++j) {
        size_t k = size_t(o * s.n + j);
        xhat[size_t(j)] = layerNormXhat(xv[k], m, is);
        gs[size_t(j)] = g[k] * sc[size_t(j)];
        sumG += gs[size_t(j)];
        sumGX += gs[size_t(j)] * xhat[size_t(j)];
        partDs[size_t(j)] += g[k] * xhat[size_t(j)];
        partDb[size_t(j)] += g[k];
      }
      if ((o + 1) % kSumChunk == 0 || o + 1 == s.outer) {
        addChunkSums(ds, partDs);
        addChunkSums(db, partDb);
      }
      C meanG = centered ? sumG / C(s.n) : C(0), meanGX = sumGX / C(s.n);
      for (int64_t j = 0; j < s.n; ++j)
        dxs[o * s.n + j] = layerNormGradInput(is, gs[size_t(j)], meanG,
                                              xhat[size_t(j)], meanGX);
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

// --- activations -------------------------------------------------------------

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
bool isFloat32Compute(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

/// Elements [i, i + n) of an fp32, fp16 or bf16 tensor as floats.
void loadFloats(const Tensor &t, int64_t i, int64_t n, float *dst) {
  if (t.dtype == DType::F16)
    loadRun<F16Io>(t.data<uint16_t>() + i, n, dst);
  else if (t.dtype == DType::BF16)
    loadRun<BF16Io>(t.data<uint16_t>() + i, n, dst);
  else
    loadRun<F32Io>(t.data<float>() + i, n, dst);
}

/// Stores floats as elements [i, i + n) of such a tensor, rounding once.
void storeFloats(Tensor &t, int64_t i, int64_t n, const float *src) {
  if (t.dtype == DType::F16)
    storeRun<F16Io>(t.data<uint16_t>() + i, n, src);
  else if (t.dtype == DType::BF16)
    storeRun<BF16Io>(t.data<uint16_t>() + i, n, src);
  else
    storeRun<F32Io>(t.data<float>() + i, n, src);
}

/// The erf-form GELU and its derivative in fp32 compute, a block at a time:
/// erf (and exp) of the whole block through vector_math.h's functions, the
/// rest with gelu_math.h's expressions. `x` is the block's input, `g` the
/// incoming gradient (nullptr forward); the result replaces `out`, which
/// may be `x` or `g` itself (element j is written after it is read).
constexpr int64_t kGeluBlock = 512;
void geluErfBlock(const float *x, const float *g, float *out, int64_t n) {
  float e[kGeluBlock], p[kGeluBlock];
  for (int64_t j = 0; j < n; ++j)
    e[j] = geluErfArgument(x[j]);
  erfInPlace(e, n);
  if (!g) {
    for (int64_t j = 0; j < n; ++j)
      out[j] = geluFromErf(x[j], e[j]);
    return;
  }
  for (int64_t j = 0; j < n; ++j)
    p[j] = geluExpArgument(x[j]);
  expInPlace(p, n);
  for (int64_t j = 0; j < n; ++j)
    out[j] = g[j] * geluDerivativeFromErfExp(x[j], e[j], p[j]);
}

void kernelGelu(KernelContext &ctx) {
  bool tanhForm = geluTanh(ctx.node);
  const Tensor &x = input(ctx, 0, "X");
  if (!tanhForm && isFloat32Compute(x.dtype)) {
    // Every element is written: no zero fill first.
    Tensor &y = overwrittenOutput(ctx, 0, x.dtype, x.dims);
    float in[kGeluBlock], out[kGeluBlock];
    const bool direct = x.dtype == DType::F32;
    for (int64_t i = 0, n = x.numel(); i < n; i += kGeluBlock) {
      int64_t len = std::min(kGeluBlock, n - i);
      if (direct) { // fp32 blocks in place: each element is read first
        geluErfBlock(x.data<float>() + i, nullptr, y.data<float>() + i, len);
        continue;
      }
      loadFloats(x, i, len, in);
      geluErfBlock(in, nullptr, out, len);
      storeFloats(y, i, len, out);
    }
    return;
  }
  floatMap(ctx, [&](auto v) { return geluForward(v, tanhForm); });
}

void kernelLeakyRelu(KernelContext &ctx) {
  float alpha = ctx.node.attrFloat("alpha", 0.01f);
  floatMap(ctx, [&](auto v) {
    using C = decltype(v);
    return leakyReluValue(v, C(alpha));
  });
}

// --- Clip --------------------------------------------------------------------

/// Clip: min/max are optional scalar inputs (opset 11+) or float attributes
/// (opset 6); an absent bound does not bound. min(max(x, lo), hi), so lo >
/// hi gives hi everywhere, as in PyTorch's clamp; NaN stays NaN.
void kernelClip(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "input");
  const Tensor *lo = optionalInput(ctx, 1), *hi = optionalInput(ctx, 2);
  for (const Tensor *b : {lo, hi})
    if (b && (b->numel() != 1 || b->dtype != x.dtype))
      fail(node, "min and max must be single elements of the input's type ",
           dtypeName(x.dtype), ", got ", dtypeName(b->dtype), " ",
           shapeString(b->dims));
  Tensor &y = output(ctx, 0, x.dtype, x.dims);
  dispatchNumeric(node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    bool hasLo = lo || node.hasAttr("min"), hasHi = hi || node.hasAttr("max");
    C vlo = lo ? Io::load(ptr<Io>(*lo), 0) : C(node.attrFloat("min", 0));
    C vhi = hi ? Io::load(ptr<Io>(*hi), 0) : C(node.attrFloat("max", 0));
    const auto *px = ptr<Io>(x);
    auto *py = ptr<Io>(y);
    for (int64_t i = 0, n = x.numel(); i < n; ++i)
      Io::store(py, i, clipValue(Io::load(px, i), hasLo, vlo, hasHi, vhi));
  });
}

// --- Max, Min, Sum -----------------------------------------------------------

enum class Fold { Max, Min, Sum };

/// Max/Min/Sum of n broadcast inputs: combined in the compute type, stored
/// once. NaN wins in Max and Min (PyTorch's maximum/minimum propagate it).
template <Fold F> void variadicKernel(KernelContext &ctx) {
  std::vector<int64_t> dims = variadicShape(ctx);
  DType t = ctx.in(0).dtype;
  Tensor &y = output(ctx, 0, t, dims);
  dispatchNumeric(ctx.node, t, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    std::vector<C> acc(size_t(y.numel()));
    for (size_t k = 0; k < ctx.inputs.size(); ++k) {
      const Tensor &in = ctx.in(k);
      const auto *p = ptr<Io>(in);
      const std::vector<int64_t> shapes[1] = {in.dims};
      forEachBroadcast(dims, shapes, [&](int64_t i, const int64_t *o) {
        C v = Io::load(p, o[0]);
        C &a = acc[size_t(i)];
        if (k == 0) {
          a = v;
        } else if constexpr (F == Fold::Sum) {
          a = sumFold(a, v);
        } else {
          a = extremumFold(F == Fold::Max, a, v);
        }
      });
    }
    auto *py = ptr<Io>(y);
    for (size_t i = 0; i < acc.size(); ++i)
      Io::store(py, int64_t(i), acc[i]);
  });
}

// --- Split -------------------------------------------------------------------

void kernelSplit(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  int64_t rank = int64_t(x.dims.size());
  if (rank == 0)
    fail(ctx.node, "cannot split a scalar");
  int64_t axis = normalizeAxis(ctx.node, ctx.node.attrInt("axis", 0), rank);
  AxisSplit s = splitAt(x.dims, axis);
  std::vector<int64_t> sizes =
      splitSizes(ctx.node, optionalInput(ctx, 1), ctx.outputs.size(), s.len);
  size_t esize = dtypeSize(x.dtype);
  int64_t offset = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<int64_t> dims = x.dims;
    dims[size_t(axis)] = sizes[k];
    if (Tensor *y = optionalOutput(ctx, k, x.dtype, dims)) {
      size_t chunk = size_t(sizes[k] * s.inner) * esize;
      for (int64_t o = 0; o < s.outer && chunk; ++o)
        std::memcpy(y->bytes.data() + size_t(o) * chunk,
                    x.bytes.data() +
                        size_t((o * s.len + offset) * s.inner) * esize,
                    chunk);
    }
    offset += sizes[k];
  }
}

// --- Dropout -----------------------------------------------------------------

/// The node's mask key (kernels/common/dropout_rng.h, shared with CUDA).
uint64_t dropoutKey(const Node &node) {
  return mpc::dropoutKey(node.name(), node.hasAttr("seed"),
                         node.attrInt("seed", 0));
}

/// ratio (input 1, opset 12+; attribute before; default 0.5) and
/// training_mode (input 2; false when absent) of a Dropout or DropoutGrad,
/// whose ratio/training_mode sit at inputs `ratioAt` and `ratioAt + 1`.
struct DropoutMode {
  double ratio = 0.5;
  bool training = false;
};

DropoutMode dropoutMode(const KernelContext &ctx, size_t ratioAt) {
  DropoutMode m;
  if (const Tensor *r = optionalInput(ctx, ratioAt)) {
    if (r->numel() != 1 || !isFloating(r->dtype))
      fail(ctx.node, "ratio must be one floating-point element, got ",
           dtypeName(r->dtype), " ", shapeString(r->dims));
    m.ratio = r->getAsDouble(0);
  } else {
    m.ratio = ctx.node.attrFloat("ratio", 0.5f);
  }
  if (const Tensor *t = optionalInput(ctx, ratioAt + 1))
    m.training = flagSet(ctx.node, *t, "training_mode");
  if (m.training && !(m.ratio >= 0 && m.ratio <= 1))
    fail(ctx.node, "ratio must be in [0, 1], got ", m.ratio);
  return m;
}

/// Training mode: keep(i) = u(i) >= ratio with u(i) the top 24 bits of
/// splitmix64((seed ^ key) + i) over 2^24 (mpc_ops.h), Y = keep ? X * scale
/// : 0 with scale = 1 / (1 - ratio) rounded to fp32 as PyTorch's is.
/// Inference mode: Y = X, mask all true.
void kernelDropout(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "data");
  DropoutMode m = dropoutMode(ctx, 1);
  Tensor &y = output(ctx, 0, x.dtype, x.dims);
  Tensor *mask = optionalOutput(ctx, 1, DType::Bool, x.dims);
  int64_t n = x.numel();
  if (!m.training || m.ratio == 0) {
    y.bytes = x.bytes;
    if (mask)
      std::fill(mask->bytes.begin(), mask->bytes.end(), uint8_t(1));
    return;
  }
  uint64_t base = ctx.seed ^ dropoutKey(ctx.node);
  const uint32_t threshold = dropoutThreshold(m.ratio);
  std::vector<uint8_t> keep(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    keep[size_t(i)] = dropoutKeep(base, i, threshold);
  if (mask)
    std::copy(keep.begin(), keep.end(), mask->bytes.begin());
  dispatchFloat(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    C scale = m.ratio == 1 ? C(0) : C(float(1.0 / (1.0 - m.ratio)));
    const auto *px = ptr<Io>(x);
    auto *py = ptr<Io>(y);
    for (int64_t i = 0; i < n; ++i)
      Io::store(py, i, keep[size_t(i)] ? Io::load(px, i) * scale : C(0));
  });
}

void kernelDropoutGrad(KernelContext &ctx) {
  const Tensor &dy = input(ctx, 0, "dY"), &mask = input(ctx, 1, "mask");
  if (mask.dtype != DType::Bool || mask.dims != dy.dims)
    fail(ctx.node, "mask must be bool of dY's shape ", shapeString(dy.dims),
         ", got ", dtypeName(mask.dtype), " ", shapeString(mask.dims));
  DropoutMode m = dropoutMode(ctx, 2);
  Tensor &dx = output(ctx, 0, dy.dtype, dy.dims);
  if (!m.training) {
    dx.bytes = dy.bytes;
    return;
  }
  dispatchFloat(ctx.node, dy.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    C scale = m.ratio == 1 ? C(0) : C(float(1.0 / (1.0 - m.ratio)));
    const auto *pg = ptr<Io>(dy);
    const uint8_t *pm = mask.data<uint8_t>();
    auto *px = ptr<Io>(dx);
    for (int64_t i = 0, n = dy.numel(); i < n; ++i)
      Io::store(px, i, pm[i] ? Io::load(pg, i) * scale : C(0));
  });
}

// --- CastLike ----------------------------------------------------------------

/// CastLike(x, like) is Cast(x) <to = like's dtype>: run through the Cast
/// kernel itself, so both convert bit for bit alike.
void kernelCastLike(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  const Tensor &like = input(ctx, 1, "target_type");
  castWithCastKernel(ctx.node, x, like.dtype, ctx.outputs.at(0), ctx.seed);
}

// --- Gather and Slice gradients ----------------------------------------------

void kernelGatherGrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &idx = input(ctx, 1, "indices"),
               &data = input(ctx, 2, "data");
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    fail(node, "indices must be int64 or int32, got ", dtypeName(idx.dtype));
  int64_t r = int64_t(data.dims.size());
  if (r == 0)
    fail(node, "data must have rank >= 1");
  int64_t axis = normalizeAxis(node, node.attrInt("axis", 0), r);
  std::vector<int64_t> want(data.dims.begin(), data.dims.begin() + axis);
  want.insert(want.end(), idx.dims.begin(), idx.dims.end());
  want.insert(want.end(), data.dims.begin() + axis + 1, data.dims.end());
  if (dy.dims != want)
    fail(node, "dY of shape ", shapeString(dy.dims), " is not the shape ",
         shapeString(want), " Gather produces from data ",
         shapeString(data.dims), " and indices ", shapeString(idx.dims));
  AxisSplit s = splitAt(data.dims, axis);
  int64_t numIdx = idx.numel();
  std::vector<int64_t> rows(static_cast<size_t>(numIdx));
  for (int64_t j = 0; j < numIdx; ++j) {
    int64_t v = loadInt(idx, j);
    if (v < -s.len || v >= s.len)
      fail(node, "index ", v, " is out of range for axis ", axis, " of size ",
           s.len);
    rows[size_t(j)] = v < 0 ? v + s.len : v;
  }
  Tensor &dd = output(ctx, 0, dy.dtype, data.dims);
  auto scatterAdd = [&](const auto *g, auto *acc) {
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t j = 0; j < numIdx; ++j) {
        const auto *src = g + (o * numIdx + j) * s.inner;
        auto *dst = acc + (o * s.len + rows[size_t(j)]) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i)
          dst[i] += src[i];
      }
  };
  // fp32 and fp64 add into the zeroed output where it lies; fp16/bf16 add in
  // fp32 and round once at the end.
  if (dy.dtype == DType::F32)
    return scatterAdd(dy.data<float>(), dd.data<float>());
  if (dy.dtype == DType::F64)
    return scatterAdd(dy.data<double>(), dd.data<double>());
  withCompute(node, {&dy}, [&](auto c) {
    using C = decltype(c);
    std::vector<C> g = loadAll<C>(dy), acc(size_t(dd.numel()), C(0));
    scatterAdd(g.data(), acc.data());
    storeAll(dd, acc);
  });
}

/// Where Slice(data, ...) reads: per axis the first index and the step, and
/// the output's dims. Same clamping as the Slice kernel (ONNX's rules).
void kernelSliceGrad(KernelContext &ctx) {
  const Tensor &dy = input(ctx, 0, "dY"), &data = input(ctx, 1, "data");
  SliceGeometry g = sliceGeometry(ctx, data.dims, 2);
  if (dy.dims != g.dims)
    fail(ctx.node, "dY of shape ", shapeString(dy.dims), " is not the shape ",
         shapeString(g.dims), " the slice of data ", shapeString(data.dims),
         " has");
  Tensor &dx = output(ctx, 0, dy.dtype, data.dims); // zero-filled
  int64_t n = dy.numel();
  if (n == 0)
    return;
  std::vector<int64_t> inStrides = rowMajorStrides(data.dims);
  std::vector<int64_t> strides(data.dims.size());
  int64_t base = 0;
  for (size_t a = 0; a < data.dims.size(); ++a) {
    strides[a] = inStrides[a] * g.step[a];
    base += g.first[a] * inStrides[a];
  }
  // Slice reads each position at most once: a plain copy, no accumulation.
  size_t size = dtypeSize(dy.dtype);
  const std::vector<int64_t> walk[1] = {strides};
  StridedWalker<1> w(dy.dims, walk);
  for (int64_t i = 0; i < n; ++i, w.next())
    copyElement(dx.bytes.data(), base + w.offset(0), dy.bytes.data(), i, size);
}

// --- elementwise gradients ---------------------------------------------------

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

void kernelGeluGrad(KernelContext &ctx) {
  bool tanhForm = geluTanh(ctx.node);
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  if (!tanhForm && dy.dims == x.dims && isFloat32Compute(dy.dtype) &&
      isFloat32Compute(x.dtype)) {
    Tensor &dx = overwrittenOutput(ctx, 0, dy.dtype, dy.dims);
    // Blocks are read whole before they are written: dX may be in place
    // over dY or X.
    float g[kGeluBlock], in[kGeluBlock], out[kGeluBlock];
    const bool direct = dy.dtype == DType::F32 && x.dtype == DType::F32;
    for (int64_t i = 0, n = dy.numel(); i < n; i += kGeluBlock) {
      int64_t len = std::min(kGeluBlock, n - i);
      if (direct) { // geluErfBlock writes element j after reading it
        geluErfBlock(x.data<float>() + i, dy.data<float>() + i,
                     dx.data<float>() + i, len);
        continue;
      }
      loadFloats(dy, i, len, g);
      loadFloats(x, i, len, in);
      geluErfBlock(in, g, out, len);
      storeFloats(dx, i, len, out);
    }
    return;
  }
  unaryGrad(ctx,
            [&](auto g, auto x) { return g * geluDerivative(x, tanhForm); });
}

void kernelErfGrad(KernelContext &ctx) {
  unaryGrad(ctx, [](auto g, auto x) { return erfGradValue(g, x); });
}

void kernelLeakyReluGrad(KernelContext &ctx) {
  float alpha = ctx.node.attrFloat("alpha", 0.01f);
  unaryGrad(ctx, [&](auto g, auto x) {
    using C = decltype(g);
    return leakyReluGradValue(g, x, C(alpha));
  });
}

void kernelClipGrad(KernelContext &ctx) {
  const Tensor *lo = optionalInput(ctx, 2), *hi = optionalInput(ctx, 3);
  for (const Tensor *b : {lo, hi})
    if (b && (b->numel() != 1 || !isFloating(b->dtype)))
      fail(ctx.node, "min and max must be single floating-point elements, got ",
           dtypeName(b->dtype), " ", shapeString(b->dims));
  // The opset-6 form carries its bounds as attributes.
  const Node &node = ctx.node;
  double vlo = lo ? lo->getAsDouble(0) : node.attrFloat("min", -INFINITY);
  double vhi = hi ? hi->getAsDouble(0) : node.attrFloat("max", INFINITY);
  unaryGrad(ctx, [&](auto g, auto x) {
    using C = decltype(g);
    return clipGradValue(g, x, C(vlo), C(vhi));
  });
}

/// ExtremumGrad(dY, Y, X0..Xn-1) <index>: dY split evenly among the inputs
/// equal to Y at each position.
void kernelExtremumGrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  int64_t index = extremumGradIndex(ctx);
  const Tensor &dy = ctx.in(0), &y = ctx.in(1);
  Tensor &dx = output(ctx, 0, dy.dtype, dy.dims);
  withCompute(node, {&dy, &y}, [&](auto c) {
    using C = decltype(c);
    std::vector<C> g = loadAll<C>(dy), yv = loadAll<C>(y);
    std::vector<C> ties(g.size(), C(0));
    std::vector<bool> mine(g.size(), false);
    for (size_t k = 2; k < ctx.inputs.size(); ++k) {
      const Tensor &xk = ctx.in(k);
      std::vector<C> xv = loadAll<C>(xk);
      const std::vector<int64_t> shapes[1] = {xk.dims};
      forEachBroadcast(dy.dims, shapes, [&](int64_t i, const int64_t *o) {
        bool eq = xv[size_t(o[0])] == yv[size_t(i)];
        ties[size_t(i)] += eq ? C(1) : C(0);
        if (k - 2 == size_t(index))
          mine[size_t(i)] = eq;
      });
    }
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = extremumGradShare(g[i], bool(mine[i]), ties[i]);
    storeAll(dx, g);
  });
}

/// ReduceExtremumGrad(dY, X, Y [, axes]): each group's dY split evenly among
/// the elements of X equal to the group's Y.
void kernelReduceExtremumGrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X"),
               &y = input(ctx, 2, "Y");
  int64_t rank = int64_t(x.dims.size());
  std::vector<bool> reduced = reducedAxes(ctx, 3, rank);
  bool keepDims = node.attrInt("keepdims", 1) != 0;
  std::vector<int64_t> kept = x.dims, squeezed;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[size_t(d)])
      kept[size_t(d)] = 1;
    else
      squeezed.push_back(x.dims[size_t(d)]);
  }
  const std::vector<int64_t> &want = keepDims ? kept : squeezed;
  if (dy.dims != want || y.dims != want)
    fail(node, "dY ", shapeString(dy.dims), " and Y ", shapeString(y.dims),
         " must have the reduced shape ", shapeString(want), " of X ",
         shapeString(x.dims));
  Tensor &dx = output(ctx, 0, dy.dtype, x.dims);
  withCompute(node, {&dy, &x, &y}, [&](auto c) {
    using C = decltype(c);
    std::vector<C> g = loadAll<C>(dy), xv = loadAll<C>(x), yv = loadAll<C>(y);
    std::vector<C> ties(g.size(), C(0)), out(xv.size(), C(0));
    const std::vector<int64_t> shapes[1] = {kept};
    forEachBroadcast(x.dims, shapes, [&](int64_t i, const int64_t *o) {
      if (xv[size_t(i)] == yv[size_t(o[0])])
        ties[size_t(o[0])] += C(1);
    });
    forEachBroadcast(x.dims, shapes, [&](int64_t i, const int64_t *o) {
      if (xv[size_t(i)] == yv[size_t(o[0])])
        out[size_t(i)] = g[size_t(o[0])] / ties[size_t(o[0])];
    });
    storeAll(dx, out);
  });
}

} // namespace

std::vector<KernelEntry> transformerKernels() {
  return {
      {"", "LayerNormalization", kernelLayerNormalization},
      {"", "Gelu", kernelGelu},
      {"", "LeakyRelu", kernelLeakyRelu},
      {"", "Clip", kernelClip},
      {"", "Max", variadicKernel<Fold::Max>},
      {"", "Min", variadicKernel<Fold::Min>},
      {"", "Sum", variadicKernel<Fold::Sum>},
      {"", "Split", kernelSplit},
      {"", "Dropout", kernelDropout},
      {"", "CastLike", kernelCastLike},
      {kMpcDomain, "LayerNormalizationGrad", kernelLayerNormalizationGrad},
      {kMpcDomain, "RMSNormalization", kernelRMSNormalization},
      {kMpcDomain, "RMSNormalizationGrad", kernelRMSNormalizationGrad},
      {kMpcDomain, "GatherGrad", kernelGatherGrad},
      {kMpcDomain, "SliceGrad", kernelSliceGrad},
      {kMpcDomain, "ErfGrad", kernelErfGrad},
      {kMpcDomain, "GeluGrad", kernelGeluGrad},
      // What fuse-gelu makes of an opset < 20 model's GELU arithmetic.
      {kMpcDomain, "Gelu", kernelGelu},
      {kMpcDomain, "GeluTanh", kernelGelu},
      {kMpcDomain, "LeakyReluGrad", kernelLeakyReluGrad},
      {kMpcDomain, "ClipGrad", kernelClipGrad},
      {kMpcDomain, "ExtremumGrad", kernelExtremumGrad},
      {kMpcDomain, "ReduceExtremumGrad", kernelReduceExtremumGrad},
      {kMpcDomain, "DropoutGrad", kernelDropoutGrad},
  };
}

} // namespace cpu
} // namespace mpc
