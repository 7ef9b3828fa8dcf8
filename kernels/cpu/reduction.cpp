// Reduction CPU kernels: ReduceSum, ReduceMean, ReduceMax, ReduceProd,
// CumSum's running sums (kernels/common/cumsum_math.h), and the backward ops
// mpc.ReduceGrad, mpc.ReduceExtremumGrad, mpc.SumToShape and
// mpc.SumToShapeAs.
//
// Axes come from the axes input (ReduceSum opset 13+, all reduces opset 18+)
// or the attribute (older opsets); keepdims and noop_with_empty_axes follow
// ONNX. fp16/bf16 inputs accumulate in fp32 and round once per output
// element, as the GPU's reductions do; fp64 accumulates in double and
// integers in int64. An empty ReduceMax yields the type's lowest value, an
// empty ReduceProd 1. ReduceProd has no gradient or device code: exports use
// it on shapes (torch's std/var count their elements with it), which
// fold-constants evaluates.
//
// Numerics as everywhere in kernels/cpu: fp16/bf16 are storage types, each
// element is computed on in fp32 and rounded to nearest-even once when
// stored; fp64 computes in double, which the float64 finite-difference
// checks of the gradient rules rely on. Every sum accumulates in that
// compute type, never in fp16. The backward kernels may see operands of
// different precisions (autocast can leave an fp32 gradient meeting an fp16
// activation): they compute in double when any operand is fp64, else in
// fp32, and store in dY's dtype (compute_support.h).
#include "ir/mpc_ops.h"
#include "kernels/common/chunked_sum.h"
#include "kernels/common/cumsum_math.h"
#include "kernels/cpu/compute_support.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>
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
      // loop the compiler vectorises. Columns in parallel: a thread sums
      // its own columns over every row, so any thread count gives the
      // same bits.
      const int64_t columnGrain = std::max<int64_t>(16, grainFor(rows));
      parallelFor(inner, columnGrain, [&](int64_t j0, int64_t j1) {
        const int64_t width = j1 - j0;
        C *partOf = part.data() + j0;
        auto addRows = [&](const GC *first, int64_t stride, int64_t n) {
          for (int64_t r = 0; r < n; ++r) {
            const GC *row = first + r * stride;
            for (int64_t j = 0; j < width; ++j)
              partOf[j] += C(row[j]);
          }
        };
        // Widened a block of rows at a time (within one chunk): the
        // columns of several rows per addRows.
        const int64_t blockRows =
            std::min(kSumChunk, std::max<int64_t>(1, 4096 / width));
        ScratchArray<GC> block(std::is_same_v<typename G::Storage, GC>
                                   ? 0
                                   : size_t(std::min(rows, blockRows) * width));
        for (int64_t c = 0; c < rows; c += kSumChunk) {
          int64_t chunkRows = std::min(kSumChunk, rows - c);
          if constexpr (std::is_same_v<typename G::Storage, GC>) {
            addRows(pg + c * inner + j0, inner, chunkRows);
          } else {
            for (int64_t r = 0; r < chunkRows; r += blockRows) {
              int64_t n = std::min(blockRows, chunkRows - r);
              for (int64_t q = 0; q < n; ++q)
                loadRun<G>(pg + (c + r + q) * inner + j0, width,
                           block.data() + q * width);
              addRows(block.data(), width, n);
            }
          }
          addChunkSums(acc.data() + j0, partOf, size_t(width));
        }
      });
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

std::vector<KernelEntry> reductionKernels() {
  return {
      {"", "ReduceSum", reduceKernel<Reduce::Sum>},
      {"", "ReduceMean", reduceKernel<Reduce::Mean>},
      {"", "ReduceMax", reduceKernel<Reduce::Max>},
      {"", "ReduceProd", reduceKernel<Reduce::Prod>},
      {"", "CumSum", kernelCumSum},
      {kMpcDomain, "ReduceGrad", kernelReduceGrad},
      {kMpcDomain, "SumToShape", kernelSumToShape},
      {kMpcDomain, "SumToShapeAs", kernelSumToShapeAs},
      {kMpcDomain, "ReduceExtremumGrad", kernelReduceExtremumGrad},
  };
}

} // namespace cpu
} // namespace mpc
