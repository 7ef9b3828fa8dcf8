// CPU kernels of the mpc-domain backward ops that autodiff emits.
//
// Semantics are exactly those of ir/mpc_ops.h. Gradient and forward
// operands may have different precisions (autocast can leave a fp32
// gradient flowing into a fp16 activation's rule); the arithmetic then runs
// in the wider compute type (double if either operand is fp64, else fp32)
// and the result takes the gradient's dtype, except for the loss rules whose
// result takes the dtype of the forward tensor (log_prob / X) it is the
// gradient of. Sums over an axis accumulate in that compute type.
#include "ir/mpc_ops.h"
#include "kernels/common/chunked_sum.h"
#include "kernels/common/softmax_math.h"
#include "kernels/cpu/cpu_util.h"

#include <algorithm>

#include <cmath>

#include <optional>
#include <type_traits>

namespace mpc {
namespace cpu {
namespace {

template <typename A, typename B>
using Wider = decltype(typename A::Compute() * typename B::Compute());

void requireSameShape(const Node &node, const Tensor &a, const Tensor &b,
                      const char *what) {
  if (a.dims != b.dims)
    fail(node, "dY of shape ", shapeString(a.dims), " does not match ", what,
         " of shape ", shapeString(b.dims));
}

void kernelReluGrad(KernelContext &ctx) {
  const Tensor &dy = input(ctx, 0, "dY"), &y = input(ctx, 1, "Y");
  requireSameShape(ctx.node, dy, y, "Y");
  Tensor &dx = overwrittenOutput(ctx, 0, dy.dtype, dy.dims);
  dispatchFloat2(ctx.node, dy.dtype, y.dtype, [&](auto gio, auto fio) {
    using G = decltype(gio);
    using Fw = decltype(fio);
    const auto *pg = ptr<G>(dy);
    const auto *pf = ptr<Fw>(y);
    auto *px = ptr<G>(dx);
    using C = typename G::Compute;
    using CF = typename Fw::Compute;
    // Block by block (whole-run fp16 conversions); dX may be in place over
    // dY or Y: each block is read before it is written.
    constexpr int64_t kBlock = 512;
    C g[kBlock];
    CF f[kBlock];
    for (int64_t i = 0, n = dy.numel(); i < n; i += kBlock) {
      int64_t m = std::min(kBlock, n - i);
      loadRun<G>(pg + i, m, g);
      loadRun<Fw>(pf + i, m, f);
      for (int64_t j = 0; j < m; ++j)
        g[j] = f[j] > 0 ? g[j] : C(0);
      storeRun<G>(px + i, m, g);
    }
  });
}

/// Where a softmax gradient's dX goes: dY's dtype (SoftmaxGrad,
/// LogSoftmaxGrad), Y's (SoftmaxGradAs, dY widened exactly), or Y's divided
/// by the scalar D in Y's dtype and cast to `to` (SoftmaxGradDiv).
enum class GradOut { AsDY, AsY, DivTo };

/// SoftmaxGrad (dX = Y * (dY - sum(dY * Y))) and LogSoftmaxGrad
/// (dX = dY - exp(Y) * sum(dY)) over one axis, dX placed as `Out` says: the
/// bits of SoftmaxGrad of the widened dY, then Div and Cast, node by node.
template <bool Log, GradOut Out = GradOut::AsDY>
void softmaxGradKernel(KernelContext &ctx) {
  const Tensor &dy = input(ctx, 0, "dY"), &y = input(ctx, 1, "Y");
  requireSameShape(ctx.node, dy, y, "Y");
  if (Out != GradOut::AsDY && dy.dtype != y.dtype &&
      !widensExactly(dy.dtype, y.dtype))
    fail(ctx.node, "Y (", dtypeName(y.dtype),
         ") must be a float type at least as wide as dY (", dtypeName(dy.dtype),
         ")");
  const Tensor *d = nullptr;
  DType outT = Out == GradOut::AsDY ? dy.dtype : y.dtype;
  if constexpr (Out == GradOut::DivTo) {
    d = &input(ctx, 2, "D");
    if (d->dtype != y.dtype || d->numel() != 1)
      fail(ctx.node, "D must be one ", dtypeName(y.dtype),
           " (Y's dtype) element, got ", dtypeName(d->dtype), " ",
           shapeString(d->dims));
    std::optional<DType> to = fromOnnxDataType(int(ctx.node.attrInt("to", 0)));
    if (!to || !isFloating(*to))
      fail(ctx.node, "attribute 'to' must be a float type");
    outT = *to;
  }
  int64_t axis = normalizeAxis(ctx.node, ctx.node.attrInt("axis", -1),
                               int64_t(dy.dims.size()));
  AxisSplit s = splitAt(dy.dims, axis);
  Tensor &dx = output(ctx, 0, outT, dy.dims);
  dispatchFloat2(ctx.node, dy.dtype, y.dtype, [&](auto gio, auto fio) {
    using G = decltype(gio);
    using Fw = decltype(fio);
    using C = Wider<G, Fw>;
    auto rows = [&](auto oio) {
      using O = decltype(oio);
      const auto *pg = ptr<G>(dy);
      const auto *pf = ptr<Fw>(y);
      auto *px = ptr<O>(dx);
      typename Fw::Compute divisor{};
      if constexpr (Out == GradOut::DivTo)
        divisor = Fw::load(ptr<Fw>(*d), 0);
      // Contiguous rows in one compute type: whole rows are converted in
      // bulk (F16C, bf16 loops) into buffers, read before dX's row is
      // written (dX may be dY's or Y's bytes), with the roundings below in
      // the same order.
      if constexpr (std::is_same_v<typename G::Compute, C> &&
                    std::is_same_v<typename Fw::Compute, C> &&
                    std::is_same_v<typename O::Compute, C>) {
        if (s.inner == 1) {
          // Buffers typed through O (the same C here), so that clang checks
          // these calls only where this branch is taken.
          using CO = typename O::Compute;
          size_t len = size_t(s.len);
          std::vector<CO> g(len), f(len), v(len);
          std::vector<typename Fw::Storage> roundY(Out == GradOut::DivTo ? len
                                                                         : 0);
          for (int64_t o = 0; o < s.outer; ++o) {
            int64_t base = o * s.len;
            loadRun<G>(pg + base, s.len, g.data());
            loadRun<Fw>(pf + base, s.len, f.data());
            CO sum = 0;
            for (size_t j = 0; j < len; ++j)
              sum += softmaxGradTerm<Log>(g[j], f[j]);
            for (size_t j = 0; j < len; ++j)
              v[j] = softmaxGradValue<Log>(g[j], f[j], sum);
            if constexpr (Out == GradOut::DivTo) {
              // Rounded to Y's dtype, divided there, rounded again.
              storeRun<Fw>(roundY.data(), s.len, v.data());
              loadRun<Fw>(roundY.data(), s.len, v.data());
              for (size_t j = 0; j < len; ++j)
                v[j] = v[j] / divisor;
              storeRun<Fw>(roundY.data(), s.len, v.data());
              loadRun<Fw>(roundY.data(), s.len, v.data());
            }
            storeRun<O>(px + base, s.len, v.data());
          }
          return;
        }
      }
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t i = 0; i < s.inner; ++i) {
          int64_t base = o * s.len * s.inner + i;
          C sum = 0;
          for (int64_t j = 0; j < s.len; ++j) {
            int64_t k = base + j * s.inner;
            sum += softmaxGradTerm<Log>(C(G::load(pg, k)), C(Fw::load(pf, k)));
          }
          for (int64_t j = 0; j < s.len; ++j) {
            int64_t k = base + j * s.inner;
            C g = G::load(pg, k), v = Fw::load(pf, k);
            C value = softmaxGradValue<Log>(g, v, sum);
            if constexpr (Out == GradOut::DivTo) {
              // Rounded to Y's dtype, divided there, then cast.
              typename Fw::Storage t;
              Fw::store(&t, 0, typename Fw::Compute(value));
              Fw::store(&t, 0, Fw::load(&t, 0) / divisor);
              O::store(px, k, typename O::Compute(Fw::load(&t, 0)));
            } else {
              O::store(px, k, typename O::Compute(value));
            }
          }
        }
    };
    if constexpr (Out == GradOut::DivTo)
      dispatchFloat(ctx.node, outT, rows);
    else if constexpr (Out == GradOut::AsY)
      rows(Fw{});
    else
      rows(G{});
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
  Tensor &dx = output(ctx, 0, lp.dtype, lp.dims);
  dispatchFloat(ctx.node, lp.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    std::vector<C> scale = lossGradScale<C>(ctx, s, dl);
    const auto *pl = ptr<Io>(lp);
    auto *px = ptr<Io>(dx);
    for (int64_t n = 0; n < s.n; ++n)
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

/// Whether x's dims, leading 1s dropped, are dY's trailing dims: then the
/// sum to x's shape adds dY's [rows, inner] view down its columns.
bool sumsWholeRows(const std::vector<int64_t> &dy,
                   const std::vector<int64_t> &x, int64_t &rows,
                   int64_t &inner) {
  size_t lead = 0;
  while (lead < x.size() && x[lead] == 1)
    ++lead;
  size_t kept = x.size() - lead;
  if (kept > dy.size() || !std::equal(x.begin() + std::ptrdiff_t(lead), x.end(),
                                      dy.end() - std::ptrdiff_t(kept)))
    return false;
  inner = 1;
  for (size_t i = lead; i < x.size(); ++i)
    inner *= x[i];
  rows = 1;
  for (size_t i = 0; i + kept < dy.size(); ++i)
    rows *= dy[i];
  return inner > 0 && rows > 0;
}

/// SumToShape with the result in dtype `to`: sums in the wider compute type
/// of dY's and to's, in dY's row-major order, in chunks of kSumChunk terms
/// (kernels/common/chunked_sum.h: the GPU's order). With `to` wider than dY
/// that is the same arithmetic, hence the same bits, as widening dY first.
void sumToShape(KernelContext &ctx, DType to) {
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  if (x.dims.size() > dy.dims.size() ||
      broadcastShapes(ctx.node, x.dims, dy.dims) != dy.dims)
    fail(ctx.node, "shape ", shapeString(x.dims), " does not broadcast to dY ",
         shapeString(dy.dims));
  // Every element is stored from acc below (after dY is read, so dX may
  // also be planned in place over dY).
  Tensor &dx = overwrittenOutput(ctx, 0, to, x.dims);
  dispatchFloat2(ctx.node, dy.dtype, to, [&](auto gio, auto oio) {
    using G = decltype(gio);
    using O = decltype(oio);
    using C = Wider<G, O>;
    using GC = typename G::Compute;
    // acc: the sum of the finished chunks; part: the chunk being summed.
    std::vector<C> acc(size_t(dx.numel()), C(0)), part(acc.size(), C(0));
    const auto *pg = ptr<G>(dy);
    int64_t rows = 0, inner = 0;
    if (sumsWholeRows(dy.dims, x.dims, rows, inner)) {
      // A bias gradient: X is dY's trailing dims, so each sum runs down a
      // column of dY seen as [rows, inner], a chunk being kSumChunk rows.
      // Row by row, each part[j] adds the same terms in the same order as
      // the broadcast walk below (the same bits), with a contiguous inner
      // loop the compiler vectorises.
      auto addRows = [&](const GC *first, int64_t n) {
        for (int64_t r = 0; r < n; ++r) {
          const GC *row = first + r * inner;
          for (int64_t j = 0; j < inner; ++j)
            part[size_t(j)] += C(row[j]);
        }
      };
      // Widened a block of whole rows at a time (within one chunk): one
      // conversion call per block rather than per (often short) row.
      const int64_t blockRows =
          std::min(kSumChunk, std::max<int64_t>(1, 4096 / inner));
      ScratchArray<GC> block(std::is_same_v<typename G::Storage, GC>
                                 ? 0
                                 : size_t(std::min(rows, blockRows) * inner));
      for (int64_t c = 0; c < rows; c += kSumChunk) {
        int64_t chunkRows = std::min(kSumChunk, rows - c);
        if constexpr (std::is_same_v<typename G::Storage, GC>) {
          addRows(pg + c * inner, chunkRows);
        } else {
          for (int64_t r = 0; r < chunkRows; r += blockRows) {
            int64_t n = std::min(blockRows, chunkRows - r);
            loadRun<G>(pg + (c + r) * inner, n * inner, block.data());
            addRows(block.data(), n);
          }
        }
        addChunkSums(acc, part);
      }
    } else {
      // Each output's terms arrive in order; its chunk closes at every
      // kSumChunk-th term and after its last one.
      std::vector<int64_t> terms(acc.size(), 0);
      const std::vector<int64_t> shapes[1] = {x.dims};
      forEachBroadcast(dy.dims, shapes, [&](int64_t i, const int64_t *o) {
        size_t k = size_t(o[0]);
        part[k] += C(G::load(pg, i));
        if (++terms[k] % kSumChunk == 0) {
          acc[k] += part[k];
          part[k] = C(0);
        }
      });
      // The last, partial chunks (a closed one left 0, which adds nothing).
      addChunkSums(acc, part);
    }
    auto *px = ptr<O>(dx);
    for (size_t i = 0; i < acc.size(); ++i)
      O::store(px, int64_t(i), typename O::Compute(acc[i]));
  });
}

void kernelSumToShape(KernelContext &ctx) {
  sumToShape(ctx, input(ctx, 0, "dY").dtype);
}

void kernelSumToShapeAs(KernelContext &ctx) {
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  if (dy.dtype != x.dtype && !widensExactly(dy.dtype, x.dtype))
    fail(ctx.node, "X (", dtypeName(x.dtype),
         ") must be a float type at least as wide as dY (", dtypeName(dy.dtype),
         ")");
  sumToShape(ctx, x.dtype);
}

void kernelReduceGrad(KernelContext &ctx) {
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  int64_t rank = int64_t(x.dims.size());
  std::vector<bool> reduced = reducedAxes(ctx, 2, rank);
  bool keepDims = ctx.node.attrInt("keepdims", 1) != 0;
  bool mean = ctx.node.attrInt("mean", 0) != 0;
  std::vector<int64_t> kept = x.dims, squeezed;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[size_t(d)]) {
      count *= x.dims[size_t(d)];
      kept[size_t(d)] = 1;
    } else {
      squeezed.push_back(x.dims[size_t(d)]);
    }
  }
  if (dy.dims != (keepDims ? kept : squeezed))
    fail(ctx.node, "dY of shape ", shapeString(dy.dims),
         " is not the reduction of X of shape ", shapeString(x.dims),
         " (expects ", shapeString(keepDims ? kept : squeezed), ")");
  Tensor &dx = output(ctx, 0, dy.dtype, x.dims);
  dispatchFloat(ctx.node, dy.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    const auto *pg = ptr<Io>(dy);
    auto *px = ptr<Io>(dx);
    const std::vector<int64_t> shapes[1] = {kept};
    forEachBroadcast(x.dims, shapes, [&](int64_t i, const int64_t *o) {
      C g = Io::load(pg, o[0]);
      Io::store(px, i, mean ? g / C(count) : g);
    });
  });
}

} // namespace

std::vector<KernelEntry> mpcGradKernels() {
  return {
      {kMpcDomain, "ReluGrad", kernelReluGrad},
      {kMpcDomain, "SoftmaxGrad", softmaxGradKernel<false>},
      {kMpcDomain, "LogSoftmaxGrad", softmaxGradKernel<true>},
      {kMpcDomain, "SoftmaxGradAs", softmaxGradKernel<false, GradOut::AsY>},
      {kMpcDomain, "SoftmaxGradDiv", softmaxGradKernel<false, GradOut::DivTo>},
      {kMpcDomain, "SoftmaxCrossEntropyLossGrad",
       kernelSoftmaxCrossEntropyLossGrad},
      {kMpcDomain, "NegativeLogLikelihoodLossGrad",
       kernelNegativeLogLikelihoodLossGrad},
      {kMpcDomain, "SumToShape", kernelSumToShape},
      {kMpcDomain, "SumToShapeAs", kernelSumToShapeAs},
      {kMpcDomain, "ReduceGrad", kernelReduceGrad},
  };
}

} // namespace cpu
} // namespace mpc
