// Gradient rules of the reductions: ReduceSum and ReduceMean (mpc.ReduceGrad,
// which broadcasts the output gradient back over the reduced axes, divided by
// the reduced count for the mean), ReduceMax (mpc.ReduceExtremumGrad, the
// gradient split evenly among ties, as PyTorch's amax does) and CumSum.
//
// The axes come from the attribute (ReduceSum before opset 13, ReduceMean
// before 18) or from the optional second input; a constant input becomes an
// attribute of the backward op, a computed one is passed through.
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

/// The attributes a reduction's backward op needs (axes normalised from the
/// attribute or a constant axes input, keepdims, noop_with_empty_axes). A
/// non-constant axes input is appended to `inputs` instead.
GradientContext::Attrs reductionGradAttrs(GradientContext &ctx,
                                          std::vector<Value *> &inputs) {
  Node &n = ctx.node();
  int64_t r = ctx.rankOf(*ctx.in(0));
  std::optional<std::vector<int64_t>> axes;
  if (n.hasAttr("axes"))
    axes = n.attrInts("axes");
  else if (ctx.in(1)) {
    axes = constantInt64s(ctx.in(1));
    if (!axes)
      inputs.push_back(ctx.in(1));
  }
  GradientContext::Attrs attrs;
  if (axes && !axes->empty()) {
    for (int64_t &a : *axes) {
      if (a < -r || a >= r)
        errorAt(n) << "axis " << a << " is out of range for rank " << r;
      if (a < 0)
        a += r;
    }
    attrs.push_back({"axes", Attribute::ofInts(*axes)});
  }
  attrs.push_back({"keepdims", Attribute::ofInt(n.attrInt("keepdims", 1))});
  if (int64_t noop = n.attrInt("noop_with_empty_axes", 0))
    attrs.push_back({"noop_with_empty_axes", Attribute::ofInt(noop)});
  return attrs;
}

void gradReduce(GradientContext &ctx, bool mean) {
  Value *x = ctx.in(0);
  Value *dY = ctx.outGrad(0);
  std::vector<Value *> inputs = {dY, x};
  GradientContext::Attrs attrs = reductionGradAttrs(ctx, inputs);
  attrs.push_back({"mean", Attribute::ofInt(mean ? 1 : 0)});
  ctx.setInputGrad(0, ctx.emitShapedLike("ReduceGrad", inputs, attrs, dY->dtype,
                                         *x, ctx.gradName(0), kMpcDomain));
}

} // namespace

void gradReduceSum(GradientContext &ctx) { gradReduce(ctx, false); }

void gradReduceMean(GradientContext &ctx) { gradReduce(ctx, true); }

/// y_t sums x over s <= t (or s < t, exclusive) in the scan's direction, so
/// dx_s sums dy over t >= s (t > s) in it: the same CumSum of dY the other
/// way round.
void gradCumSum(GradientContext &ctx) {
  Value *dY = ctx.outGrad(0);
  GradientContext::Attrs attrs = {
      {"exclusive", Attribute::ofInt(ctx.node().attrInt("exclusive", 0))},
      {"reverse", Attribute::ofInt(ctx.node().attrInt("reverse", 0) ? 0 : 1)}};
  ctx.setInputGrad(0, ctx.emitShapedLike("CumSum", {dY, ctx.in(1)},
                                         std::move(attrs), dY->dtype,
                                         *ctx.in(0), ctx.gradName(0)));
}

void gradReduceMax(GradientContext &ctx) {
  // The same axes handling as ReduceSum/ReduceMean's rule (reductionGradAttrs).
  Value *x = ctx.in(0);
  Value *dY = ctx.outGrad(0);
  std::vector<Value *> inputs = {dY, x, ctx.out(0)};
  GradientContext::Attrs attrs = reductionGradAttrs(ctx, inputs);
  ctx.setInputGrad(0, ctx.emitShapedLike("ReduceExtremumGrad", inputs, attrs,
                                         dY->dtype, *x, ctx.gradName(0),
                                         kMpcDomain));
}

} // namespace mpc
