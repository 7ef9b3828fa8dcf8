// Softmax and LogSoftmax CPU kernels (opset-13 semantics: one axis).
//
// Both subtract the row maximum before exponentiating and compute in fp32
// (fp64 for fp64 inputs) whatever the storage type, so an fp16 softmax
// rounds only its result. mpc.SoftmaxTo reads a narrower X as stored and
// computes and stores in the wider `to`. The axis attribute defaults to -1 as
// in opset 13+. Opsets below 13 defined the default as 1 and flattened the
// input to 2-D around the axis; the kernel cannot see the model's opset, so it
// always applies the opset-13 rule. The two agree for 2-D inputs with axis 1
// (what the PyTorch exporter writes for classification heads); the importer is
// where an old-opset model with another layout must be rewritten.
#include "ir/mpc_ops.h"
#include "kernels/common/softmax_math.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/vector_math.h"

#include <cmath>
#include <optional>
#include <type_traits>

namespace mpc {
namespace cpu {
namespace {

/// softmaxRowTerms (softmax_math.h); in fp32 with vector_math.h's exp, a
/// whole row at a time (SLEEF's 1-ulp exp, where the shared default takes
/// the C library's, one call an element).
template <typename C> SoftmaxRowStats<C> rowTerms(int64_t len, C *row) {
  if constexpr (std::is_same_v<C, float>)
    return softmaxRowTerms(len, row,
                           [](float *r, int64_t n) { expInPlace(r, n); });
  else
    return softmaxRowTerms(len, row);
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
  std::vector<C> row(size_t(s.len));
  // A contiguous row divided in the compute type: the quotients are rounded
  // to In's storage and back in bulk (F16C, bf16 loops), as the Div node
  // stored them.
  constexpr bool bulkDivide = std::is_same_v<typename In::Compute, C>;
  std::vector<typename In::Storage> rounded(
      bulkDivide && divisor && s.inner == 1 ? size_t(s.len) : 0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t base = o * s.len * s.inner + i;
      if (!rounded.empty()) {
        if constexpr (bulkDivide) {
          loadRun<In>(px + base, s.len, row.data());
          for (int64_t j = 0; j < s.len; ++j)
            row[size_t(j)] = row[size_t(j)] / *divisor;
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
}

template <bool Log> void softmaxKernel(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  int64_t axis = normalizeAxis(ctx.node, ctx.node.attrInt("axis", -1),
                               int64_t(x.dims.size()));
  Tensor &y = output(ctx, 0, x.dtype, x.dims);
  AxisSplit s = splitAt(x.dims, axis);
  dispatchFloat(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    softmaxRows<Log, Io, Io>(x, y, s);
  });
}

/// The 'to' attribute of SoftmaxTo / DivSoftmaxTo: a float type at least as
/// wide as X's.
DType softmaxTarget(const KernelContext &ctx, const Tensor &x) {
  std::optional<DType> to = fromOnnxDataType(int(ctx.node.attrInt("to", 0)));
  if (!to || !isFloating(*to) ||
      (*to != x.dtype && !widensExactly(x.dtype, *to)))
    fail(ctx.node,
         "attribute 'to' must be a float type at least as wide as X (",
         dtypeName(x.dtype), ")");
  return *to;
}

/// The optional Ylow of SoftmaxTo / DivSoftmaxTo: Y cast to `low` by the
/// Cast kernel itself (a synthetic Cast node), so the bits are the Cast's.
void writeLowCopy(const KernelContext &ctx, const Tensor &y) {
  if (ctx.outputs.size() < 2 || !ctx.outputs[1])
    return;
  int64_t low = ctx.node.attrInt("low", toOnnxDataType(DType::F16));
  std::optional<DType> l = fromOnnxDataType(int(low));
  if (!l || !isFloating(*l))
    fail(ctx.node, "attribute 'low' = ", low, " is not a float type");
  castWithCastKernel(ctx.node, y, *l, ctx.outputs[1], ctx.seed);
}

/// mpc.SoftmaxTo: Softmax of X widened exactly to `to`, the same bits as
/// Softmax(Cast(X, to)); with `Div`, mpc.DivSoftmaxTo: Softmax(Cast(Div(X,
/// D), to)), D one element of X's dtype, the bits of the three nodes. Ylow
/// as writeLowCopy says.
template <bool Div> void softmaxToKernel(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "X");
  const Tensor *d = Div ? &input(ctx, 1, "D") : nullptr;
  if (d && (d->dtype != x.dtype || d->numel() != 1))
    fail(ctx.node, "D must be one ", dtypeName(x.dtype),
         " (X's dtype) element, got ", dtypeName(d->dtype), " ",
         shapeString(d->dims));
  DType to = softmaxTarget(ctx, x);
  int64_t axis = normalizeAxis(ctx.node, ctx.node.attrInt("axis", -1),
                               int64_t(x.dims.size()));
  Tensor &y = output(ctx, 0, to, x.dims);
  AxisSplit s = splitAt(x.dims, axis);
  dispatchFloat2(ctx.node, x.dtype, to, [&](auto in, auto out) {
    using In = decltype(in);
    typename In::Compute divisor = d ? In::load(ptr<In>(*d), 0) : 1;
    softmaxRows<false, In, decltype(out)>(x, y, s, d ? &divisor : nullptr);
  });
  writeLowCopy(ctx, y);
}

} // namespace

std::vector<KernelEntry> softmaxKernels() {
  return {{"", "Softmax", softmaxKernel<false>},
          {"", "LogSoftmax", softmaxKernel<true>},
          {kMpcDomain, "SoftmaxTo", softmaxToKernel<false>},
          {kMpcDomain, "DivSoftmaxTo", softmaxToKernel<true>}};
}

} // namespace cpu
} // namespace mpc
