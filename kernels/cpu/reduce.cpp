// Reduction CPU kernels: ReduceSum, ReduceMean, ReduceMax, ReduceProd, and
// CumSum's running sums (kernels/common/cumsum_math.h).
//
// Axes come from the axes input (ReduceSum opset 13+, all reduces opset 18+)
// or the attribute (older opsets); keepdims and noop_with_empty_axes follow
// ONNX. fp16/bf16 inputs accumulate in fp32 and round once per output
// element, as the GPU's reductions do; fp64 accumulates in double and
// integers in int64. An empty ReduceMax yields the type's lowest value, an
// empty ReduceProd 1. ReduceProd has no gradient or device code: exports use
// it on shapes (torch's std/var count their elements with it), which
// fold-constants evaluates.
#include "kernels/common/cumsum_math.h"
#include "kernels/cpu/cpu_util.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace mpc {
namespace cpu {
namespace {

enum class Reduce { Sum, Mean, Max, Prod };

template <Reduce R> void reduceKernel(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "data");
  int64_t rank = int64_t(x.dims.size());
  std::vector<bool> reduced = reducedAxes(ctx, 1, rank);
  bool keepDims = ctx.node.attrInt("keepdims", 1) != 0;
  std::vector<int64_t> kept = x.dims, dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[size_t(d)])
      kept[size_t(d)] = 1;
    if (keepDims || !reduced[size_t(d)])
      dims.push_back(kept[size_t(d)]);
  }
  Tensor &y = output(ctx, 0, x.dtype, dims);
  dispatchNumeric(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    using Acc = std::conditional_t<std::is_integral_v<C>, int64_t, C>;
    int64_t outN = y.numel(), inN = x.numel();
    Acc init = R == Reduce::Max ? (std::is_integral_v<C>
                                       ? Acc(std::numeric_limits<C>::min())
                                       : -std::numeric_limits<Acc>::infinity())
                                : Acc(R == Reduce::Prod ? 1 : 0);
    std::vector<Acc> acc(size_t(outN), init);
    const auto *px = ptr<Io>(x);
    // X in row-major order (each output's terms are added in that order),
    // run by run, widened a block at a time.
    constexpr int64_t kBlock = 512;
    C buf[kBlock];
    const std::vector<int64_t> shapes[1] = {kept};
    forEachBroadcastRun(
        x.dims, shapes,
        [&](int64_t i, int64_t len, const int64_t *off, const int64_t *step) {
          for (int64_t c = 0; c < len; c += kBlock) {
            int64_t m = std::min(kBlock, len - c);
            loadRun<Io>(px + i + c, m, buf);
            if constexpr (R != Reduce::Max) {
              if (step[0] == 0) {
                // A run into one output (the innermost axis is reduced):
                // the same adds in the same order, in a register.
                Acc a = acc[size_t(off[0])];
                for (int64_t j = 0; j < m; ++j) {
                  if constexpr (R == Reduce::Prod) {
                    if constexpr (std::is_integral_v<Acc>)
                      a = Acc(uint64_t(a) * uint64_t(Acc(buf[j])));
                    else
                      a *= Acc(buf[j]);
                  } else if constexpr (std::is_integral_v<Acc>) {
                    a = Acc(uint64_t(a) + uint64_t(Acc(buf[j])));
                  } else {
                    a += Acc(buf[j]);
                  }
                }
                acc[size_t(off[0])] = a;
                continue;
              }
            }
            for (int64_t j = 0; j < m; ++j) {
              Acc v = Acc(buf[j]);
              Acc &a = acc[size_t(off[0] + (c + j) * step[0])];
              if constexpr (R == Reduce::Max) {
                if (v > a || v != v) // NaN wins and then stays
                  a = a != a ? a : v;
              } else if constexpr (R == Reduce::Prod) {
                if constexpr (std::is_integral_v<Acc>)
                  a = Acc(uint64_t(a) * uint64_t(v)); // wraps
                else
                  a *= v;
              } else if constexpr (std::is_integral_v<Acc>) {
                a = Acc(uint64_t(a) + uint64_t(v)); // wraps like the GPU
              } else {
                a += v;
              }
            }
          }
        });
    auto *py = ptr<Io>(y);
    int64_t count = outN ? inN / outN : 0;
    for (int64_t i = 0; i < outN; ++i) {
      Acc v = acc[size_t(i)];
      if (R == Reduce::Mean) {
        if constexpr (std::is_integral_v<Acc>)
          v = count ? v / count : 0;
        else
          v = v / Acc(count);
      }
      Io::store(py, i, C(v));
    }
  });
}

/// CumSum's axis (input 1): a scalar int32/int64 in [-rank, rank).
int64_t cumsumAxis(const KernelContext &ctx, int64_t rank) {
  std::vector<int64_t> axis = readInts(ctx.node, input(ctx, 1, "axis"), "axis");
  if (axis.size() != 1)
    fail(ctx.node, "axis must be a scalar, got ", axis.size(), " values");
  return normalizeAxis(ctx.node, axis[0], rank);
}

void kernelCumSum(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "x");
  if (x.dims.empty())
    fail(ctx.node, "x must have rank >= 1");
  int64_t axis = cumsumAxis(ctx, int64_t(x.dims.size()));
  bool exclusive = ctx.node.attrInt("exclusive", 0) != 0;
  bool reverse = ctx.node.attrInt("reverse", 0) != 0;
  Tensor &y = overwrittenOutput(ctx, 0, x.dtype, x.dims);
  AxisSplit s = splitAt(x.dims, axis);
  dispatchNumeric(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    using Acc = std::conditional_t<std::is_integral_v<C>, int64_t, C>;
    const auto *px = ptr<Io>(x);
    auto *py = ptr<Io>(y);
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t base = o * s.len * s.inner + i;
        cumsumLine<Acc>(
            s.len, exclusive, reverse,
            [&](int64_t t) { return Acc(Io::load(px, base + t * s.inner)); },
            [&](int64_t t, Acc v) { Io::store(py, base + t * s.inner, C(v)); });
      }
  });
}

} // namespace

std::vector<KernelEntry> reduceKernels() {
  return {{"", "ReduceSum", reduceKernel<Reduce::Sum>},
          {"", "ReduceMean", reduceKernel<Reduce::Mean>},
          {"", "ReduceMax", reduceKernel<Reduce::Max>},
          {"", "ReduceProd", reduceKernel<Reduce::Prod>},
          {"", "CumSum", kernelCumSum}};
}

} // namespace cpu
} // namespace mpc
