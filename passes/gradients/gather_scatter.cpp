// Gradient rules of the ops that read or write elements at indices: Gather,
// GatherElements, GatherND, ScatterND and ScatterElements.
//
// Gather (the embedding) scatter-adds dY into zeros of data's shape along
// its axis: mpc.GatherGrad (ir/mpc_ops.h).
//
// GatherElements reads one data element per index, so its data gradient is
// dY scatter-added into zeros of data's shape at the positions the indices
// name: mpc.GatherElementsGrad (ir/mpc_ops.h), the element-wise
// counterpart of Gather's mpc.GatherGrad. The indices get no gradient.
//
// Gradient rules of GatherND and ScatterND, the ops that address slices by
// index tuples, written with the two ops themselves:
//
//   GatherND(data, idx):            d data = ScatterND<add>(zeros, idx, dY)
//   ScatterND(data, idx, upd):      d upd  = GatherND(dY, idx)
//                                   d data = ScatterND(dY, idx, zeros)
//                                            (reduction none: the written
//                                            places take no gradient)
//                                          = dY (reduction add)
//
// A GatherND gradient sums repeated tuples (scatter-add), as PyTorch's
// index backward does. ScatterND with a repeated tuple and reduction none
// keeps the last update (the kernel's index order), so only that update
// gets dY there in PyTorch; this rule gives it to every update of the
// tuple (ONNX leaves repeats undefined). Reductions mul, max and min, and
// GatherND's batch_dims, are refused naming the node.
//
// ScatterElements, which writes single elements where GatherElements reads
// them, has the same rules with the element-wise ops:
//
//   ScatterElements(data, idx, upd): d upd  = GatherElements(dY, idx)
//                                    d data = ScatterElements(dY, idx, zeros)
//                                             (none) or dY (add)
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "passes/gradients/rule_support.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

/// Zeros of v's shape and dtype t (ConstantOfShape of its shape).
Value *zerosLike(GradientContext &ctx, Value *v, DType t,
                 const std::string &what) {
  Tensor zero(t, {1});
  return ctx.emitShapedLike("ConstantOfShape", {ctx.shapeOf(v)},
                            {{"value", Attribute::ofTensor(zero)}}, t, *v,
                            ctx.tempName(what));
}

} // namespace

void gradGather(GradientContext &ctx) {
  Value *data = ctx.in(0);
  int64_t axis = normalizedAxis(ctx, *data, 0);
  Value *dY = ctx.outGrad(0);
  ctx.setInputGrad(0, ctx.emitShapedLike("GatherGrad", {dY, ctx.in(1), data},
                                         {{"axis", Attribute::ofInt(axis)}},
                                         dY->dtype, *data, ctx.gradName(0),
                                         kMpcDomain));
}

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

void gradGatherND(GradientContext &ctx) {
  const Node &n = ctx.node();
  if (n.attrInt("batch_dims", 0) != 0)
    errorAt(n) << "mpc differentiates GatherND only with batch_dims = 0";
  Value *data = ctx.in(0), *dY = ctx.outGrad(0);
  Value *zeros = zerosLike(ctx, data, dY->dtype, "zeros");
  ctx.setInputGrad(
      0, ctx.emitShapedLike("ScatterND", {zeros, ctx.in(1), dY},
                            {{"reduction", Attribute::ofString("add")}},
                            dY->dtype, *data, ctx.gradName(0)));
}

/// ScatterND's and ScatterElements' rule: `gather` reads the updates'
/// places, `attrs` (ScatterElements' axis) go to both ops.
void gradScatter(GradientContext &ctx, const char *gather,
                 const GradientContext::Attrs &attrs) {
  const Node &n = ctx.node();
  std::string reduction = n.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    errorAt(n) << "mpc differentiates " << n.opType()
               << " with reduction none or add, not " << reduction;
  Value *dY = ctx.outGrad(0);
  if (ctx.wants(0)) {
    if (reduction == "add")
      ctx.setInputGrad(0, dY);
    else
      ctx.setInputGrad(
          0, ctx.emitShapedLike(
                 n.opType(),
                 {dY, ctx.in(1),
                  zerosLike(ctx, ctx.in(2), dY->dtype, "zero_updates")},
                 attrs, dY->dtype, *ctx.in(0), ctx.gradName(0)));
  }
  if (ctx.wants(2))
    ctx.setInputGrad(2, ctx.emitShapedLike(gather, {dY, ctx.in(1)}, attrs,
                                           dY->dtype, *ctx.in(2),
                                           ctx.gradName(2)));
}

void gradScatterND(GradientContext &ctx) { gradScatter(ctx, "GatherND", {}); }

void gradScatterElements(GradientContext &ctx) {
  gradScatter(ctx, "GatherElements",
              {{"axis", Attribute::ofInt(ctx.node().attrInt("axis", 0))}});
}

} // namespace mpc
