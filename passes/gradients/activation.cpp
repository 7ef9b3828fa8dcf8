// Gradient rules of the activations: Relu, Sigmoid, Tanh, Gelu (and the
// fused mpc.Gelu / mpc.GeluTanh), LeakyRelu, mpc.LogSigmoid, Softmax and
// LogSoftmax.
//
// Activations whose derivative is a function of the output (Relu, Tanh,
// Sigmoid, Softmax, LogSoftmax) read the forward output, not the input, so
// the input need not stay alive for the backward.
//
// Softmax's axis is normalised for the opset: from opset 13 the ops
// normalise one axis (default -1); before, they flatten the input to 2-D at
// `axis` (default 1) and normalise the second dimension, so the gradient
// does the same flattening around the backward op.
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "passes/gradients/rule_support.h"
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

void gradRelu(GradientContext &ctx) {
  ctx.setInputGrad(0, ctx.emitMpc("ReluGrad", {ctx.outGrad(0), ctx.out(0)}, {},
                                  *ctx.in(0), ctx.gradName(0)));
}

void gradTanh(GradientContext &ctx) {
  // d tanh = 1 - Y^2.
  Value *y = ctx.out(0);
  Value *yy = ctx.mul(y, y, ctx.tempName("y_sq"));
  Value *deriv = ctx.binary("Sub", ctx.scalarConstant(y->dtype, 1.0, "one"), yy,
                            ctx.tempName("deriv"));
  setUnaryGrad(ctx, deriv);
}

void gradSigmoid(GradientContext &ctx) {
  // d sigmoid = Y (1 - Y).
  Value *y = ctx.out(0);
  Value *om = ctx.binary("Sub", ctx.scalarConstant(y->dtype, 1.0, "one"), y,
                         ctx.tempName("one_minus_y"));
  setUnaryGrad(ctx, ctx.mul(y, om, ctx.tempName("deriv")));
}

void gradLogSigmoid(GradientContext &ctx) {
  // d log sigmoid(x) = sigmoid(-x), as one mpc.LogSigmoidGrad from X: from
  // Y it would be 1 - exp(Y), which cancels where Y is near 0 (x >> 0).
  ctx.setInputGrad(0, ctx.emitMpc("LogSigmoidGrad", {ctx.outGrad(0), ctx.in(0)},
                                  {}, *ctx.in(0), ctx.gradName(0)));
}

void gradGelu(GradientContext &ctx) {
  // Gelu, and mpc.Gelu / mpc.GeluTanh (fuse-gelu), whose name is the form.
  Node &n = ctx.node();
  std::string approximate = n.domain() == kMpcDomain
                                ? (n.opType() == "GeluTanh" ? "tanh" : "none")
                                : n.attrString("approximate", "none");
  ctx.setInputGrad(0, ctx.emitMpc("GeluGrad", {ctx.outGrad(0), ctx.in(0)},
                                  singleAttr("approximate",
                                             Attribute::ofString(approximate)),
                                  *ctx.in(0), ctx.gradName(0)));
}

void gradLeakyRelu(GradientContext &ctx) {
  Node &n = ctx.node();
  ctx.setInputGrad(
      0,
      ctx.emitMpc("LeakyReluGrad", {ctx.outGrad(0), ctx.in(0)},
                  {{"alpha", Attribute::ofFloat(n.attrFloat("alpha", 0.01f))}},
                  *ctx.in(0), ctx.gradName(0)));
}

void gradSoftmax(GradientContext &ctx) { gradSoftmaxLike(ctx, "SoftmaxGrad"); }

void gradLogSoftmax(GradientContext &ctx) {
  gradSoftmaxLike(ctx, "LogSoftmaxGrad");
}

} // namespace mpc
