// Loss CPU kernels: SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss,
// and their backward ops mpc.SoftmaxCrossEntropyLossGrad and
// mpc.NegativeLogLikelihoodLossGrad.
//
// Scores are [N, C] or [N, C, d1, ...] and labels [N] or [N, d1, ...]
// (int64 or int32). Each position's loss is -w[label] * logp[n, label, d];
// positions whose label equals ignore_index contribute neither loss nor
// weight. "mean" divides the weighted sum by the summed weights, as ONNX and
// PyTorch do. Everything is computed in fp32 (fp64 for fp64 scores), and a
// label outside [0, C) that is not ignore_index is a user error naming the
// node and the label. lossSetup() (declared in cpu_util.h) is shared by the
// forward and the backward kernels so both validate labels alike. A
// gradient's result takes the dtype of the forward tensor (log_prob / X) it
// is the gradient of.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/softmax_support.h"
#include "kernels/cpu/vector_math.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace mpc {
namespace cpu {

LossSetup lossSetup(const KernelContext &ctx, const Tensor &scores,
                    const Tensor &labels, const Tensor *weights) {
  const Node &node = ctx.node;
  LossSetup s;
  std::string red = node.attrString("reduction", "mean");
  if (red == "none")
    s.reduction = LossSetup::None;
  else if (red == "sum")
    s.reduction = LossSetup::Sum;
  else if (red == "mean")
    s.reduction = LossSetup::Mean;
  else
    fail(node, "unknown reduction '", red, "' (expects none, sum or mean)");
  s.hasIgnore = node.hasAttr("ignore_index");
  s.ignoreIndex = node.attrInt("ignore_index", 0);
  if (scores.dims.size() < 2)
    fail(node, "scores must be [N, C, ...], got ", shapeString(scores.dims));
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32)
    fail(node, "labels must be int64 or int32, got ", dtypeName(labels.dtype));
  std::vector<int64_t> want = scores.dims;
  want.erase(want.begin() + 1);
  if (labels.dims != want)
    fail(node, "labels of shape ", shapeString(labels.dims),
         " do not match scores of shape ", shapeString(scores.dims),
         " (expects ", shapeString(want), ")");
  s.n = scores.dims[0];
  s.c = scores.dims[1];
  s.d = s.n ? labels.numel() / s.n : 0;
  s.perPosition = want;
  if (weights) {
    if (weights->dims != std::vector<int64_t>{s.c})
      fail(node, "weights must be [", s.c, "], got ",
           shapeString(weights->dims));
    if (!isFloating(weights->dtype))
      fail(node, "weights must be floating point, got ",
           dtypeName(weights->dtype));
  }
  s.labels.resize(size_t(labels.numel()));
  s.weight.resize(s.labels.size());
  for (int64_t i = 0; i < labels.numel(); ++i) {
    int64_t t = loadInt(labels, i);
    s.labels[size_t(i)] = t;
    if (s.hasIgnore && t == s.ignoreIndex) {
      s.weight[size_t(i)] = 0;
      continue;
    }
    if (t < 0 || t >= s.c)
      fail(node, "label ", t, " at position ", i, " is out of range [0, ", s.c,
           ")");
    s.weight[size_t(i)] = weights ? loadDouble(*weights, t) : 1.0;
  }
  return s;
}

namespace {

/// Shared forward: log_prob is computed (Softmax) or read (NLL) per position.
/// Samples per thread at least in the losses' parallel loops.
int64_t lossGrain(const LossSetup &s) { return grainFor(s.c * s.d); }

template <bool Softmax> void lossKernel(KernelContext &ctx) {
  const Tensor &scores = input(ctx, 0, Softmax ? "scores" : "input");
  const Tensor &labels = input(ctx, 1, "target");
  LossSetup s = lossSetup(ctx, scores, labels, optionalInput(ctx, 2));
  std::vector<int64_t> lossDims;
  if (s.reduction == LossSetup::None)
    lossDims = s.perPosition;
  Tensor &loss = output(ctx, 0, scores.dtype, lossDims);
  // log_prob's every element is written below: no zero fill first.
  Tensor *logProb = Softmax && ctx.hasOutput(1)
                        ? &overwrittenOutput(ctx, 1, scores.dtype, scores.dims)
                        : nullptr;
  dispatchFloat(ctx.node, scores.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    const auto *px = ptr<Io>(scores);
    // lp[(n * C + c) * D + d]: log-probabilities in the compute type.
    std::vector<C> lp;
    if constexpr (Softmax && std::is_same_v<C, float>) {
      if (s.d == 1) {
        // Contiguous class rows in fp32: the softmax kernels' rowTerms (the
        // chained max, SLEEF's 1-ulp exp a row at a time, the sixteen-lane
        // sum) on a copy of the row. One call of the C library's exp per
        // score was 8 ns a score, 20x PyTorch's loss.
        lp.resize(size_t(scores.numel()));
        parallelFor(s.n, lossGrain(s), [&](int64_t n0, int64_t n1) {
          std::vector<float> terms(size_t(s.c));
          for (int64_t n = n0; n < n1; ++n) {
            float *row = lp.data() + n * s.c;
            loadFloats(scores, n * s.c, s.c, row);
            std::copy(row, row + s.c, terms.begin());
            const SoftmaxRowStats<float> st = rowTerms(s.c, terms.data());
            const float logSum = std::log(st.sum);
            for (int64_t c = 0; c < s.c; ++c)
              row[c] = row[c] - st.max - logSum;
          }
        });
      }
    }
    if (Softmax && lp.empty()) {
      lp.resize(size_t(scores.numel()));
      // Samples in parallel (each row alone: the same bits on any count).
      parallelFor(s.n, lossGrain(s), [&](int64_t n0, int64_t n1) {
        std::vector<C> row(size_t(s.c));
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t d = 0; d < s.d; ++d) {
            int64_t base = n * s.c * s.d + d;
            C mx = -std::numeric_limits<C>::infinity();
            for (int64_t c = 0; c < s.c; ++c) {
              row[size_t(c)] = Io::load(px, base + c * s.d);
              mx = std::max(mx, row[size_t(c)]);
            }
            C sum = 0;
            for (int64_t c = 0; c < s.c; ++c)
              sum += std::exp(row[size_t(c)] - mx);
            C logSum = std::log(sum);
            for (int64_t c = 0; c < s.c; ++c)
              lp[size_t(base + c * s.d)] = row[size_t(c)] - mx - logSum;
          }
      });
    }
    if (Softmax && logProb) {
      auto *pl = ptr<Io>(*logProb);
      parallelFor(s.n, lossGrain(s), [&](int64_t n0, int64_t n1) {
        const int64_t row = s.c * s.d;
        if constexpr (std::is_same_v<C, float>)
          storeFloats(*logProb, n0 * row, (n1 - n0) * row,
                      lp.data() + n0 * row);
        else
          for (int64_t i = n0 * row; i < n1 * row; ++i)
            Io::store(pl, i, lp[size_t(i)]);
      });
    }
    auto logProbAt = [&](int64_t i) {
      return Softmax ? lp[size_t(i)] : Io::load(px, i);
    };
    auto *pout = ptr<Io>(loss);
    C total = 0, totalWeight = 0;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t d = 0; d < s.d; ++d) {
        size_t pos = size_t(n * s.d + d);
        C w = C(s.weight[pos]);
        C l = s.ignored(pos)
                  ? C(0)
                  : -logProbAt((n * s.c + s.labels[pos]) * s.d + d) * w;
        if (s.reduction == LossSetup::None)
          Io::store(pout, int64_t(pos), l);
        total += l;
        totalWeight += w;
      }
    if (s.reduction == LossSetup::Sum)
      Io::store(pout, 0, total);
    else if (s.reduction == LossSetup::Mean)
      Io::store(pout, 0, total / totalWeight);
  });
}

/// The per-position scale s of a loss gradient: dL / sum(w) for mean, dL for
/// sum, dL[pos] for none.
template <typename C>
std::vector<C> lossGradScale(const KernelContext &ctx, const LossSetup &s,
                             const Tensor &dl) {
  size_t positions = s.labels.size();
  std::vector<C> scale(positions);
  if (s.reduction == LossSetup::None) {
    if (dl.dims != s.perPosition)
      fail(ctx.node, "dL must have shape ", shapeString(s.perPosition),
           " for reduction 'none', got ", shapeString(dl.dims));
    for (size_t p = 0; p < positions; ++p)
      scale[p] = C(loadDouble(dl, int64_t(p)));
    return scale;
  }
  if (dl.numel() != 1)
    fail(ctx.node, "dL must be a scalar, got shape ", shapeString(dl.dims));
  C g = C(loadDouble(dl, 0));
  if (s.reduction == LossSetup::Mean) {
    C total = 0;
    for (size_t p = 0; p < positions; ++p)
      total += C(s.weight[p]);
    g = g / total;
  }
  scale.assign(positions, g);
  return scale;
}

void kernelSoftmaxCrossEntropyLossGrad(KernelContext &ctx) {
  const Tensor &dl = input(ctx, 0, "dL"), &lp = input(ctx, 1, "log_prob"),
               &labels = input(ctx, 2, "labels");
  if (!isFloating(dl.dtype))
    fail(ctx.node, "dL must be floating point, got ", dtypeName(dl.dtype));
  LossSetup s = lossSetup(ctx, lp, labels, optionalInput(ctx, 3));
  // Every element is written below: no zero fill first.
  Tensor &dx = overwrittenOutput(ctx, 0, lp.dtype, lp.dims);
  dispatchFloat(ctx.node, lp.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    std::vector<C> scale = lossGradScale<C>(ctx, s, dl);
    const auto *pl = ptr<Io>(lp);
    auto *px = ptr<Io>(dx);
    if constexpr (std::is_same_v<C, float>) {
      if (s.d == 1) {
        // Contiguous class rows in fp32: exp a row at a time (SLEEF's 1-ulp
        // exp, as the forward's), the same expression per element.
        parallelFor(s.n, lossGrain(s), [&](int64_t n0, int64_t n1) {
          std::vector<float> row(size_t(s.c));
          for (int64_t n = n0; n < n1; ++n) {
            size_t pos = size_t(n);
            if (s.ignored(pos)) {
              std::fill(row.begin(), row.end(), 0.f);
            } else {
              loadFloats(lp, n * s.c, s.c, row.data());
              expInPlace(row.data(), s.c);
              const float w = float(s.weight[pos]), g = scale[pos];
              const int64_t label = s.labels[pos];
              for (int64_t c = 0; c < s.c; ++c)
                row[size_t(c)] =
                    (row[size_t(c)] - (c == label ? 1.f : 0.f)) * w * g;
            }
            storeFloats(dx, n * s.c, s.c, row.data());
          }
        });
        return;
      }
    }
    parallelFor(s.n, lossGrain(s), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t d = 0; d < s.d; ++d) {
          size_t pos = size_t(n * s.d + d);
          bool ignored = s.ignored(pos);
          C w = C(s.weight[pos]);
          for (int64_t c = 0; c < s.c; ++c) {
            int64_t k = (n * s.c + c) * s.d + d;
            C v = 0;
            if (!ignored) {
              C hot = c == s.labels[pos] ? C(1) : C(0);
              v = (std::exp(Io::load(pl, k)) - hot) * w * scale[pos];
            }
            Io::store(px, k, v);
          }
        }
    });
  });
}

void kernelNegativeLogLikelihoodLossGrad(KernelContext &ctx) {
  const Tensor &dl = input(ctx, 0, "dL"), &x = input(ctx, 1, "X"),
               &labels = input(ctx, 2, "labels");
  if (!isFloating(dl.dtype))
    fail(ctx.node, "dL must be floating point, got ", dtypeName(dl.dtype));
  LossSetup s = lossSetup(ctx, x, labels, optionalInput(ctx, 3));
  Tensor &dx = output(ctx, 0, x.dtype, x.dims); // zero-filled
  dispatchFloat(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    std::vector<C> scale = lossGradScale<C>(ctx, s, dl);
    auto *px = ptr<Io>(dx);
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t d = 0; d < s.d; ++d) {
        size_t pos = size_t(n * s.d + d);
        if (s.ignored(pos))
          continue;
        int64_t k = (n * s.c + s.labels[pos]) * s.d + d;
        Io::store(px, k, -C(s.weight[pos]) * scale[pos]);
      }
  });
}

} // namespace

std::vector<KernelEntry> lossKernels() {
  return {
      {"", "SoftmaxCrossEntropyLoss", lossKernel<true>},
      {"", "NegativeLogLikelihoodLoss", lossKernel<false>},
      {kMpcDomain, "SoftmaxCrossEntropyLossGrad",
       kernelSoftmaxCrossEntropyLossGrad},
      {kMpcDomain, "NegativeLogLikelihoodLossGrad",
       kernelNegativeLogLikelihoodLossGrad},
  };
}

} // namespace cpu
} // namespace mpc
