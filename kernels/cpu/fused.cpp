// CPU kernels of the fused mpc ops the compiler's fusions write: mpc.Gelu and
// mpc.GeluTanh (activation.cpp's Gelu kernel), mpc.FusedMatMul (MatMul with
// transposed operands), mpc.SoftmaxTo and mpc.DivSoftmaxTo (a softmax
// widened to `to`, after a division), mpc.SoftmaxGradAs and
// mpc.SoftmaxGradDiv (softmax_support.h's gradient placed in Y's dtype),
// mpc.AddTo (an fp32 add of widened inputs, stored narrowed).
//
// Each gives the bits of the nodes it replaces: it runs the same rows and
// products as the unfused kernels (shared_kernels.h, softmax_support.h), and
// a cast the fused op folds in goes through the Cast kernel itself.
#include "ir/mpc_ops.h"
#include "kernels/cpu/compute_support.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/shared_kernels.h"
#include "kernels/cpu/softmax_support.h"

#include <algorithm>
#include <optional>

namespace mpc {
namespace cpu {

namespace {

void kernelFusedMatMul(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &a = input(ctx, 0, "A"), &b = input(ctx, 1, "B");
  if (a.dims.size() < 2 || b.dims.size() < 2)
    fail(node, "operands must have rank >= 2, got ", shapeString(a.dims),
         " and ", shapeString(b.dims));
  int64_t ta = node.attrInt("transA", 0), tb = node.attrInt("transB", 0);
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    fail(node, "transA and transB must be 0 or 1, got ", ta, " and ", tb);
  matMul(ctx, ta != 0, tb != 0);
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
  castWithCastKernel(ctx.node, y, floatTypeAttr(ctx.node, "low", DType::F16),
                     ctx.outputs[1], ctx.seed);
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
  // softmaxRows writes every element: no zero fill first.
  Tensor &y = overwrittenOutput(ctx, 0, to, x.dims);
  AxisSplit s = splitAt(x.dims, axis);
  dispatchFloat2(ctx.node, x.dtype, to, [&](auto in, auto out) {
    using In = decltype(in);
    typename In::Compute divisor = d ? In::load(ptr<In>(*d), 0) : 1;
    softmaxRows<false, In, decltype(out)>(x, y, s, d ? &divisor : nullptr);
  });
  writeLowCopy(ctx, y);
}

/// mpc.AddTo: A + B widened exactly to fp32, added, stored in `to`; Clow
/// = Cast(C, low). Blocks of both inputs are read before a block of C is
/// written, so C may take A's or B's bytes (the plan writes it in place).
void kernelAddTo(KernelContext &ctx) {
  const Tensor &a = input(ctx, 0, "A"), &b = input(ctx, 1, "B");
  for (const Tensor *t : {&a, &b})
    if (!isFloat32Compute(t->dtype))
      fail(ctx.node, "adds fp32, fp16 or bf16, got ", dtypeName(t->dtype));
  if (a.dims != b.dims)
    fail(ctx.node, "A of shape ", shapeString(a.dims), " and B of shape ",
         shapeString(b.dims), " must have the same shape");
  DType to = floatTypeAttr(ctx.node, "to", DType::F32);
  if (!isFloat32Compute(to))
    fail(ctx.node, "attribute 'to' must be fp32, fp16 or bf16, got ",
         dtypeName(to));
  Tensor &c = overwrittenOutput(ctx, 0, to, a.dims);
  Tensor *low = nullptr;
  if (ctx.hasOutput(1)) {
    DType lowT = floatTypeAttr(ctx.node, "low", DType::F16);
    if (lowT != DType::F16 && lowT != DType::BF16)
      fail(ctx.node, "attribute 'low' must be fp16 or bf16, got ",
           dtypeName(lowT));
    low = &overwrittenOutput(ctx, 1, lowT, a.dims);
  }
  parallelFor(a.numel(), kGrainValues, [&](int64_t k0, int64_t k1) {
    constexpr int64_t kBlock = 1024;
    float x[kBlock], y[kBlock];
    for (int64_t k = k0; k < k1; k += kBlock) {
      const int64_t n = std::min(kBlock, k1 - k);
      loadFloats(a, k, n, x);
      loadFloats(b, k, n, y);
      for (int64_t j = 0; j < n; ++j)
        x[j] += y[j];
      storeFloats(c, k, n, x);
      if (!low)
        continue;
      // Clow is the Cast of C as stored (rounded to `to` already).
      if (to != DType::F32)
        loadFloats(c, k, n, x);
      storeFloats(*low, k, n, x);
    }
  });
}

} // namespace

std::vector<KernelEntry> fusedKernels() {
  return {
      {kMpcDomain, "Gelu", kernelGelu},
      {kMpcDomain, "GeluTanh", kernelGelu},
      {kMpcDomain, "FusedMatMul", kernelFusedMatMul},
      {kMpcDomain, "AddTo", kernelAddTo},
      {kMpcDomain, "SoftmaxTo", softmaxToKernel<false>},
      {kMpcDomain, "DivSoftmaxTo", softmaxToKernel<true>},
      {kMpcDomain, "SoftmaxGradAs", softmaxGradKernel<false, GradOut::AsY>},
      {kMpcDomain, "SoftmaxGradDiv", softmaxGradKernel<false, GradOut::DivTo>},
  };
}

} // namespace cpu
} // namespace mpc
