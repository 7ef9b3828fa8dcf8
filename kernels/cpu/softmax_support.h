// The softmax rows and the softmax gradient shared by Softmax, LogSoftmax
// and their gradients (activation.cpp) and the fused forms mpc.SoftmaxTo,
// mpc.DivSoftmaxTo, mpc.SoftmaxGradAs and mpc.SoftmaxGradDiv (fused.cpp),
// so a fused op gives the bits of the nodes it replaces. Rows are computed in
// fp32 (fp64 for fp64) with kernels/common/softmax_math.h's formulas; the
// rows' sums (the forward's terms, the gradient's dY * Y) add in
// kernels/common/lane_sum.h's fixed lanes.
#pragma once

#include "ir/mpc_ops.h"
#include "kernels/common/chunked_sum.h"
#include "kernels/common/lane_sum.h"
#include "kernels/common/softmax_math.h"
#include "kernels/cpu/compute_support.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_math.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <vector>

namespace mpc {
namespace cpu {

/// Outer rows per thread at least when rows run in parallel: some 16K
/// elements (tens of microseconds against a parallel region's few).
inline int64_t rowsGrain(const AxisSplit &s) {
  return grainFor(s.len * s.inner);
}

/// softmaxMax (m < v ? v : m) over a row in eight interleaved chains joined
/// in order: the serial chain waited a compare's latency per element (a
/// sixth of the attention softmax's time). The value is the serial one's:
/// the largest non-NaN element, -inf when there is none; only which zero
/// comes out of a row whose maximum is both +0 and -0 may differ, and the
/// terms exp(x - max) it feeds are the same for either.
inline float rowMax(int64_t len, const float *row) {
  constexpr int kChains = 8;
  float m[kChains];
  for (float &v : m)
    v = -INFINITY;
  int64_t j = 0;
  for (; j + kChains <= len; j += kChains)
    for (int k = 0; k < kChains; ++k)
      m[k] = softmaxMax(m[k], row[j + k]);
  for (int k = 0; j < len; ++j, ++k)
    m[k] = softmaxMax(m[k], row[j]);
  float mx = m[0];
  for (int k = 1; k < kChains; ++k)
    mx = softmaxMax(mx, m[k]);
  return mx;
}

/// The sum of a row's terms in lane_sum.h's sixteen lanes (the serial
/// sum's chain was a third of the attention softmax's time).
inline float rowSum(int64_t len, const float *row) {
  return laneSum<float>(len, [row](int64_t j) { return row[j]; });
}

/// softmaxRowTerms (softmax_math.h)'s maximum and terms; in fp32 with
/// rowMax's chains, vector_math.h's exp a whole row at a time (SLEEF's 1-ulp
/// exp, where the shared default takes the C library's, one call an
/// element) and rowSum's lanes.
template <typename C> SoftmaxRowStats<C> rowTerms(int64_t len, C *row) {
  if constexpr (std::is_same_v<C, float>) {
    const float mx = rowMax(len, row);
    for (int64_t j = 0; j < len; ++j)
      row[j] = row[j] - mx;
    expInPlace(row, len);
    return {mx, rowSum(len, row)};
  } else {
    return softmaxRowTerms(len, row);
  }
}

/// Softmax / LogSoftmax of `x` into `y` over `axis`, x's elements read as
/// `In` (widened exactly) and the row computed and stored as `Out`. With a
/// `divisor` (mpc.DivSoftmaxTo), each element is first divided by it in
/// In's dtype (rounded there, as a Div node would).
template <bool Log, typename In, typename Out>
void softmaxRows(const Tensor &x, Tensor &y, const AxisSplit &s,
                 const typename In::Compute *divisor = nullptr) {
  using C = typename Out::Compute;
  const auto *px = ptr<In>(x);
  auto *py = ptr<Out>(y);
  // A contiguous row divided in the compute type: the quotients are rounded
  // to In's storage and back in bulk (F16C, bf16 loops), as the Div node
  // stored them.
  constexpr bool bulkDivide = std::is_same_v<typename In::Compute, C>;
  // Rows in parallel (each row alone: the same bits on any thread count).
  parallelFor(s.outer, rowsGrain(s), [&](int64_t o0, int64_t o1) {
    std::vector<C> row(size_t(s.len));
    std::vector<typename In::Storage> rounded(
        bulkDivide && divisor && s.inner == 1 ? size_t(s.len) : 0);
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t base = o * s.len * s.inner + i;
        if (!rounded.empty()) {
          if constexpr (bulkDivide) {
            loadRun<In>(px + base, s.len, row.data());
            // The divisor in a local: read through the pointer, it might
            // alias the row, and the divisions ran one at a time.
            const C dv = *divisor;
            for (int64_t j = 0; j < s.len; ++j)
              row[size_t(j)] = row[size_t(j)] / dv;
            storeRun<In>(rounded.data(), s.len, row.data());
            loadRun<In>(rounded.data(), s.len, row.data());
          }
        } else if (divisor) {
          for (int64_t j = 0; j < s.len; ++j) {
            typename In::Storage q;
            In::store(&q, 0, In::load(px, base + j * s.inner) / *divisor);
            row[size_t(j)] = C(In::load(&q, 0));
          }
        } else if constexpr (std::is_same_v<typename In::Compute, C>) {
          if (s.inner == 1)
            loadRun<In>(px + base, s.len, row.data());
          else
            for (int64_t j = 0; j < s.len; ++j)
              row[size_t(j)] = In::load(px, base + j * s.inner);
        } else {
          for (int64_t j = 0; j < s.len; ++j)
            row[size_t(j)] = C(In::load(px, base + j * s.inner));
        }
        if (Log) {
          SoftmaxRowStats<C> st = softmaxRowStats<C>(
              s.len, [&](int64_t j) { return row[size_t(j)]; });
          C logSum = logOf(st.sum);
          for (int64_t j = 0; j < s.len; ++j)
            Out::store(py, base + j * s.inner,
                       logSoftmaxValue(row[size_t(j)], st.max, logSum));
          continue;
        }
        // The row's exponentials are kept and divided: exp is taken once
        // per element.
        SoftmaxRowStats<C> st = rowTerms(s.len, row.data());
        for (int64_t j = 0; j < s.len; ++j)
          row[size_t(j)] = softmaxFromTerm(row[size_t(j)], st.sum);
        if (s.inner == 1)
          storeRun<Out>(py + base, s.len, row.data());
        else
          for (int64_t j = 0; j < s.len; ++j)
            Out::store(py, base + j * s.inner, row[size_t(j)]);
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
  // Every element is written below: no zero fill first.
  Tensor &dx = overwrittenOutput(ctx, 0, outT, dy.dims);
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
          parallelFor(s.outer, rowsGrain(s), [&](int64_t o0, int64_t o1) {
            std::vector<CO> g(len), f(len), v(len);
            std::vector<typename Fw::Storage> roundY(Out == GradOut::DivTo ? len
                                                                           : 0);
            for (int64_t o = o0; o < o1; ++o) {
              int64_t base = o * s.len;
              loadRun<G>(pg + base, s.len, g.data());
              loadRun<Fw>(pf + base, s.len, f.data());
              const CO *gj = g.data(), *fj = f.data();
              CO sum = laneSum<CO>(s.len, [gj, fj](int64_t j) {
                return softmaxGradTerm<Log>(gj[j], fj[j]);
              });
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
          });
          return;
        }
      }
      parallelFor(s.outer, rowsGrain(s), [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o)
          for (int64_t i = 0; i < s.inner; ++i) {
            int64_t base = o * s.len * s.inner + i;
            C sum = laneSum<C>(s.len, [&](int64_t j) {
              int64_t k = base + j * s.inner;
              return softmaxGradTerm<Log>(C(G::load(pg, k)),
                                          C(Fw::load(pf, k)));
            });
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
      });
    };
    if constexpr (Out == GradOut::DivTo)
      dispatchFloat(ctx.node, outT, rows);
    else if constexpr (Out == GradOut::AsY)
      rows(Fw{});
    else
      rows(G{});
  });
}

} // namespace cpu
} // namespace mpc
