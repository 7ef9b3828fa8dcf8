// Softmax and LogSoftmax CPU kernels (opset-13 semantics: one axis).
//
// Both subtract the row maximum before exponentiating and compute in fp32
// (fp64 for fp64 inputs) whatever the storage type, so an fp16 softmax
// rounds only its result. The axis attribute defaults to -1 as in opset 13+.
// Opsets below 13 defined the default as 1 and flattened the input to 2-D
// around the axis; the kernel cannot see the model's opset, so it always
// applies the opset-13 rule. The two agree for 2-D inputs with axis 1 (what
// the PyTorch exporter writes for classification heads); the importer is
// where an old-opset model with another layout must be rewritten.
#include "kernels/common/softmax_math.h"
#include "kernels/cpu/cpu_util.h"

#include <cmath>

namespace mpc {
namespace cpu {
namespace {

template <bool Log> void softmaxKernel(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  int64_t axis = normalizeAxis(ctx.node, ctx.node.attrInt("axis", -1),
                               int64_t(x.dims.size()));
  Tensor &y = output(ctx, 0, x.dtype, x.dims);
  AxisSplit s = splitAt(x.dims, axis);
  dispatchFloat(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    const auto *px = ptr<Io>(x);
    auto *py = ptr<Io>(y);
    std::vector<C> row(size_t(s.len));
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t base = o * s.len * s.inner + i;
        if (s.inner == 1)
          loadRun<Io>(px + base, s.len, row.data());
        else
          for (int64_t j = 0; j < s.len; ++j)
            row[size_t(j)] = Io::load(px, base + j * s.inner);
        if (Log) {
          SoftmaxRowStats<C> st = softmaxRowStats<C>(
              s.len, [&](int64_t j) { return row[size_t(j)]; });
          C logSum = logOf(st.sum);
          for (int64_t j = 0; j < s.len; ++j)
            Io::store(py, base + j * s.inner,
                      logSoftmaxValue(row[size_t(j)], st.max, logSum));
          continue;
        }
        // The row's exponentials are kept and divided: exp is taken once
        // per element, with softmaxValue's bits.
        SoftmaxRowStats<C> st = softmaxRowTerms<C>(s.len, row.data());
        for (int64_t j = 0; j < s.len; ++j)
          row[size_t(j)] = softmaxFromTerm(row[size_t(j)], st.sum);
        if (s.inner == 1)
          storeRun<Io>(py + base, s.len, row.data());
        else
          for (int64_t j = 0; j < s.len; ++j)
            Io::store(py, base + j * s.inner, row[size_t(j)]);
      }
  });
}

} // namespace

std::vector<KernelEntry> softmaxKernels() {
  return {{"", "Softmax", softmaxKernel<false>},
          {"", "LogSoftmax", softmaxKernel<true>}};
}

} // namespace cpu
} // namespace mpc
