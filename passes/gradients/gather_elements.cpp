// Gradient rule of GatherElements (issue 5).
//
// GatherElements reads one data element per index, so its data gradient is
// dY scatter-added into zeros of data's shape at the positions the indices
// name: mpc.GatherElementsGrad (ir/mpc_ops.h), the element-wise
// counterpart of Gather's mpc.GatherGrad. The indices get no gradient.
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "support/diagnostics.h"

namespace mpc {

void gradGatherElements(GradientContext &ctx) {
  Value *data = ctx.in(0);
  Value *dY = ctx.outGrad(0);
  // The axis is kept as written: the op normalises it against data's rank.
  GradientContext::Attrs attrs = {
      {"axis", Attribute::ofInt(ctx.node().attrInt("axis", 0))}};
  ctx.setInputGrad(
      0, ctx.emitShapedLike("GatherElementsGrad", {dY, ctx.in(1), data}, attrs,
                            dY->dtype, *data, ctx.gradName(0), kMpcDomain));
}

} // namespace mpc
