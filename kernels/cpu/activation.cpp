// Activation CPU kernels: Relu, Tanh, Sigmoid, Gelu (erf and tanh forms),
// LeakyRelu, mpc.LogSigmoid, Softmax and LogSoftmax, and their mpc.*Grad
// backward ops.
//
// Relu, Tanh and Sigmoid run the elementwise unary loops
// (elementwise_support.h). Softmax and LogSoftmax (opset-13 semantics: one
// axis) and their gradients are softmax_support.h's rows.
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
//
// mpc.LogSigmoid (Y = log sigmoid(X)) and mpc.LogSigmoidGrad (dX = dY *
// sigmoid(-X)) use the stable formulas of kernels/common/log_sigmoid_math.h.
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
#include "kernels/common/gelu_math.h"
#include "kernels/common/log_sigmoid_math.h"
#include "kernels/common/piecewise_math.h"
#include "kernels/cpu/compute_support.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/elementwise_support.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/shared_kernels.h"
#include "kernels/cpu/softmax_support.h"
#include "kernels/cpu/vector_math.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace mpc {
namespace cpu {

namespace {

void kernelRelu(KernelContext &ctx) {
  // NaN propagates (as PyTorch's relu does); everything else clamps at 0.
  numericUnary(ctx, [](auto v) {
    using T = decltype(v);
    return v > T(0) || v != v ? v : T(0);
  });
}

void kernelTanh(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) { return std::tanh(v); });
}

void kernelSigmoid(KernelContext &ctx) {
  floatUnary(ctx, [](auto v) {
    using T = decltype(v);
    return T(1) / (T(1) + std::exp(-v));
  });
}

/// The erf-form GELU and its derivative in fp32 compute, a block at a time
/// through vector_math.h's one-pass functions (erf, exp and gelu_math.h's
/// expressions).
constexpr int64_t kGeluBlock = 512;
/// Blocks per thread at least (16 x 512 elements: tens of microseconds,
/// well above a parallel region's start).
constexpr int64_t kParallelBlocks = 16;
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

void kernelGelu(KernelContext &ctx) {
  bool tanhForm = geluTanh(ctx.node);
  const Tensor &x = input(ctx, 0, "X");
  if (!tanhForm && isFloat32Compute(x.dtype)) {
    // Every element is written: no zero fill first.
    Tensor &y = overwrittenOutput(ctx, 0, x.dtype, x.dims);
    const bool direct = x.dtype == DType::F32;
    const int64_t n = x.numel();
    // Blocks in parallel (kernels/cpu/parallel.h): each element alone, so
    // the same bits on any thread count.
    parallelFor(ceilDiv(n, kGeluBlock), kParallelBlocks,
                [&](int64_t b0, int64_t b1) {
                  float block[kGeluBlock];
                  for (int64_t i = b0 * kGeluBlock;
                       i < std::min(n, b1 * kGeluBlock); i += kGeluBlock) {
                    int64_t len = std::min(kGeluBlock, n - i);
                    if (direct) { // fp32: computed in Y (which may be X itself)
                      float *py = y.data<float>() + i;
                      const float *px = x.data<float>() + i;
                      if (py != px)
                        std::copy(px, px + len, py);
                      geluInPlace(py, len);
                      continue;
                    }
                    loadFloats(x, i, len, block);
                    geluInPlace(block, len);
                    storeFloats(y, i, len, block);
                  }
                });
    return;
  }
  floatMap(ctx, [&](auto v) { return geluForward(v, tanhForm); });
}

namespace {

void kernelLeakyRelu(KernelContext &ctx) {
  float alpha = ctx.node.attrFloat("alpha", 0.01f);
  floatMap(ctx, [&](auto v) {
    using C = decltype(v);
    return leakyReluValue(v, C(alpha));
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
    const bool direct = dy.dtype == DType::F32 && x.dtype == DType::F32;
    const int64_t n = dy.numel();
    parallelFor(
        ceilDiv(n, kGeluBlock), kParallelBlocks, [&](int64_t b0, int64_t b1) {
          float g[kGeluBlock], in[kGeluBlock];
          for (int64_t i = b0 * kGeluBlock; i < std::min(n, b1 * kGeluBlock);
               i += kGeluBlock) {
            int64_t len = std::min(kGeluBlock, n - i);
            if (direct) { // element j is written after X's and dY's are read
              const float *px = x.data<float>() + i;
              float *pd = dx.data<float>() + i;
              if (pd == px) { // dX over X: X's block kept aside first
                std::copy(px, px + len, in);
                px = in;
              }
              const float *pg = dy.data<float>() + i;
              if (pd != pg)
                std::copy(pg, pg + len, pd);
              geluGradInPlace(pd, px, len);
              continue;
            }
            loadFloats(dy, i, len, g);
            loadFloats(x, i, len, in);
            geluGradInPlace(g, in, len);
            storeFloats(dx, i, len, g);
          }
        });
    return;
  }
  unaryGrad(ctx,
            [&](auto g, auto x) { return g * geluDerivative(x, tanhForm); });
}

void kernelLeakyReluGrad(KernelContext &ctx) {
  float alpha = ctx.node.attrFloat("alpha", 0.01f);
  unaryGrad(ctx, [&](auto g, auto x) {
    using C = decltype(g);
    return leakyReluGradValue(g, x, C(alpha));
  });
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

template <bool Log> void softmaxKernel(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  int64_t axis = normalizeAxis(ctx.node, ctx.node.attrInt("axis", -1),
                               int64_t(x.dims.size()));
  // softmaxRows writes every element: no zero fill first.
  Tensor &y = overwrittenOutput(ctx, 0, x.dtype, x.dims);
  AxisSplit s = splitAt(x.dims, axis);
  dispatchFloat(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    softmaxRows<Log, Io, Io>(x, y, s);
  });
}

void kernelLogSigmoid(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "X");
  Tensor &y = overwrittenOutput(ctx, 0, x.dtype, x.dims);
  dispatchFloat(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    const auto *px = ptr<Io>(x);
    auto *py = ptr<Io>(y);
    // Element i is read before it is written: Y may be in place over X.
    for (int64_t i = 0, n = x.numel(); i < n; ++i)
      Io::store(py, i, logSigmoidValue(Io::load(px, i)));
  });
}

void kernelLogSigmoidGrad(KernelContext &ctx) {
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  if (dy.dims != x.dims)
    fail(ctx.node, "dY of shape ", shapeString(dy.dims),
         " does not match X of shape ", shapeString(x.dims));
  Tensor &dx = overwrittenOutput(ctx, 0, dy.dtype, dy.dims);
  dispatchFloat2(ctx.node, dy.dtype, x.dtype, [&](auto gio, auto xio) {
    using G = decltype(gio);
    using X = decltype(xio);
    using C = std::common_type_t<typename G::Compute, typename X::Compute>;
    const auto *pg = ptr<G>(dy);
    const auto *px = ptr<X>(x);
    auto *pd = ptr<G>(dx);
    for (int64_t i = 0, n = dy.numel(); i < n; ++i)
      G::store(pd, i,
               typename G::Compute(
                   logSigmoidGradValue(C(G::load(pg, i)), C(X::load(px, i)))));
  });
}

} // namespace

std::vector<KernelEntry> activationKernels() {
  return {
      {"", "Relu", kernelRelu},
      {"", "Tanh", kernelTanh},
      {"", "Sigmoid", kernelSigmoid},
      {"", "Gelu", kernelGelu},
      {"", "LeakyRelu", kernelLeakyRelu},
      {kMpcDomain, "GeluGrad", kernelGeluGrad},
      {kMpcDomain, "LeakyReluGrad", kernelLeakyReluGrad},
      {kMpcDomain, "ReluGrad", kernelReluGrad},
      {kMpcDomain, "SoftmaxGrad", softmaxGradKernel<false>},
      {kMpcDomain, "LogSoftmaxGrad", softmaxGradKernel<true>},
      {"", "Softmax", softmaxKernel<false>},
      {"", "LogSoftmax", softmaxKernel<true>},
      {kMpcDomain, "LogSigmoid", kernelLogSigmoid},
      {kMpcDomain, "LogSigmoidGrad", kernelLogSigmoidGrad},
  };
}

} // namespace cpu
} // namespace mpc
