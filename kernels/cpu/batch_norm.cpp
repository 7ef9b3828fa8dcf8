// BatchNormalization and mpc.BatchNormalizationGrad CPU kernels.
//
// Semantics are those of ir/mpc_ops.h: training mode normalises with
// the batch mean and biased variance and updates the running statistics with
// the unbiased variance (PyTorch's rule); inference mode uses the mean and
// var inputs. X may have another dtype than scale/B/mean/var (fp16 X with
// fp32 statistics): everything is computed in fp32 (fp64 when an operand is
// fp64), Y is rounded once to X's dtype and the running statistics to their
// own. The backward recomputes the batch statistics with the very function
// the forward used, so both see bit-identical mean and variance.
#include "ir/batch_norm_mode.h"
#include "ir/mpc_ops.h"
#include "kernels/cpu/conv_util.h"
#include "kernels/cpu/node_geometry.h"

#include <cmath>

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

/// Batch mean and biased variance of every channel: two passes (mean, then
/// the mean of squared deviations), summed in double whatever C is (a
/// channel of a 112 x 112 map at batch 2 is 25,088 terms, where an fp32
/// running sum drifts by 1e-6 relative: PyTorch's and onnxruntime's
/// statistics do not), rounded to C once. Forward and backward both call
/// this, so they agree bit for bit.
template <typename C>
void batchStatistics(const ChannelLayout &l, const std::vector<C> &x,
                     std::vector<C> &mean, std::vector<C> &var) {
  mean.assign(size_t(l.c), C(0));
  var.assign(size_t(l.c), C(0));
  double count = double(l.count());
  for (int64_t c = 0; c < l.c; ++c) {
    double sum = 0;
    for (int64_t n = 0; n < l.n; ++n) {
      const C *row = x.data() + (n * l.c + c) * l.inner;
      for (int64_t i = 0; i < l.inner; ++i)
        sum += double(row[i]);
    }
    double m = sum / count, sq = 0;
    for (int64_t n = 0; n < l.n; ++n) {
      const C *row = x.data() + (n * l.c + c) * l.inner;
      for (int64_t i = 0; i < l.inner; ++i) {
        double d = double(row[i]) - m;
        sq += d * d;
      }
    }
    mean[size_t(c)] = C(m);
    var[size_t(c)] = C(sq / count);
  }
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
  std::vector<C> xv = widen<C>(node, x, "X");
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
  std::vector<C> yv(xv.size());
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t c = 0; c < l.c; ++c) {
      size_t base = size_t((n * l.c + c) * l.inner);
      C m = mean[size_t(c)], k = inv[size_t(c)] * scale[size_t(c)];
      C b = bias[size_t(c)];
      for (int64_t i = 0; i < l.inner; ++i)
        yv[base + size_t(i)] = (xv[base + size_t(i)] - m) * k + b;
    }
  storeAll(node, y, yv);
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
  std::vector<C> xv = widen<C>(node, x, "X"), dyv = widen<C>(node, dy, "dY");
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
    std::vector<double> s1(size_t(l.c), 0.0), s2(size_t(l.c), 0.0);
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t c = 0; c < l.c; ++c) {
        size_t base = size_t((n * l.c + c) * l.inner);
        C m = mean[size_t(c)], k = inv[size_t(c)];
        for (int64_t i = 0; i < l.inner; ++i) {
          double g = double(dyv[base + size_t(i)]);
          s1[size_t(c)] += g;
          s2[size_t(c)] += g * double((xv[base + size_t(i)] - m) * k);
        }
      }
    for (int64_t c = 0; c < l.c; ++c) {
      sumDy[size_t(c)] = C(s1[size_t(c)]);
      sumDyXhat[size_t(c)] = C(s2[size_t(c)]);
    }
  }
  if (Tensor *dx = optionalOutput(ctx, 0, dy.dtype, x.dims)) {
    std::vector<C> dxv(xv.size());
    C count = C(l.count());
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t c = 0; c < l.c; ++c) {
        size_t base = size_t((n * l.c + c) * l.inner);
        C m = mean[size_t(c)], k = inv[size_t(c)];
        C f = scale[size_t(c)] * k;
        C db = sumDy[size_t(c)] / count, ds = sumDyXhat[size_t(c)] / count;
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
    storeAll(node, *dx, dxv);
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

} // namespace

std::vector<KernelEntry> batchNormKernels() {
  return {
      {"", "BatchNormalization", kernelBatchNormalization},
      {kMpcDomain, "BatchNormalizationGrad", kernelBatchNormalizationGrad},
  };
}

} // namespace cpu
} // namespace mpc
