// Gradient rule of TopK: the values are elements of X picked at the
// indices, as GatherElements(X, Indices, axis) would pick them, so dX is dY
// scatter-added into zeros of X's shape at those indices
// (mpc.GatherElementsGrad, GatherElements' own gradient op; the indices of
// one line are distinct, so nothing adds up). This is torch.topk's
// backward. The Indices output and K carry no gradient.
//
// ArgMax and ArgMin have only an int64 output, so no gradient reaches them
// (registry.cpp lists no rule for them).
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "support/diagnostics.h"

namespace mpc {

void gradTopK(GradientContext &ctx) {
  const Node &n = ctx.node();
  Value *x = ctx.in(0), *dY = ctx.outGrad(0), *indices = ctx.out(1);
  if (!dY)
    return;
  if (!indices)
    errorAt(n) << "mpc differentiates TopK through its Indices output, which "
                  "this node omits";
  GradientContext::Attrs attrs = {
      {"axis", Attribute::ofInt(n.attrInt("axis", -1))}};
  ctx.setInputGrad(0, ctx.emitShapedLike("GatherElementsGrad", {dY, indices, x},
                                         attrs, dY->dtype, *x, ctx.gradName(0),
                                         kMpcDomain));
}

} // namespace mpc
