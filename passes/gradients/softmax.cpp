// Gradient rules of Softmax and LogSoftmax: mpc.SoftmaxGrad and
// mpc.LogSoftmaxGrad on the forward output.
//
// The axis is normalised for the opset: from opset 13 the ops normalise one
// axis (default -1); before, they flatten the input to 2-D at `axis`
// (default 1) and normalise the second dimension, so the gradient does the
// same flattening around the backward op.
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

/// dims flattened to 2-D at axis (the coercion of opset < 13).
Dims flattenDims(const Dims &dims, int64_t axis) {
  Dim rows(1), cols(1);
  for (size_t i = 0; i < dims.size(); ++i) {
    Dim &d = int64_t(i) < axis ? rows : cols;
    d = d.isKnown() && dims[i].isKnown() ? Dim(d.value * dims[i].value) : Dim();
  }
  return {rows, cols};
}

void gradSoftmaxLike(GradientContext &ctx, const char *gradOp) {
  Node &n = ctx.node();
  Value *x = ctx.in(0);
  Value *y = ctx.out(0);
  Value *dY = ctx.outGrad(0);
  int64_t r = ctx.rankOf(*x);
  bool perAxis = ctx.opset() >= 13;
  int64_t axis = n.attrInt("axis", perAxis ? -1 : 1);
  if (axis < -r || axis > (perAxis ? r - 1 : r) || (r == 0 && perAxis))
    errorAt(n) << "axis " << axis << " is out of range for rank " << r;
  if (axis < 0)
    axis += r;

  if (perAxis || axis == r - 1) {
    ctx.setInputGrad(
        0, ctx.emitShapedLike(gradOp, {dY, y},
                              singleAttr("axis", Attribute::ofInt(axis)),
                              dY->dtype, *x, ctx.gradName(0), kMpcDomain));
    return;
  }
  Dims flat = flattenDims(x->dims, axis);
  GradientContext::Attrs flatten = {{"axis", Attribute::ofInt(axis)}};
  Value *dY2 = ctx.emit("Flatten", {dY}, flatten, dY->dtype, flat,
                        ctx.tempName("dy_2d"));
  Value *y2 =
      ctx.emit("Flatten", {y}, flatten, y->dtype, flat, ctx.tempName("y_2d"));
  Value *dX2 = ctx.emit(gradOp, {dY2, y2}, {{"axis", Attribute::ofInt(1)}},
                        dY->dtype, flat, ctx.tempName("2d"), kMpcDomain);
  ctx.setInputGrad(0, ctx.reshapeLike(dX2, x, ctx.gradName(0)));
}

} // namespace

void gradSoftmax(GradientContext &ctx) { gradSoftmaxLike(ctx, "SoftmaxGrad"); }

void gradLogSoftmax(GradientContext &ctx) {
  gradSoftmaxLike(ctx, "LogSoftmaxGrad");
}

} // namespace mpc
