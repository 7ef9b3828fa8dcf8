// Gradient rules of MaxPool, AveragePool and GlobalAveragePool.
//
// MaxPool and AveragePool get their own backward ops (mpc.MaxPoolGrad,
// mpc.AveragePoolGrad) that take the forward node's window attributes and
// resolve the window as the forward did; MaxPoolGrad re-finds each window's
// maximum in X rather than reading the optional Indices output, so models
// that do not ask for Indices (the exporter's) need nothing extra.
// GlobalAveragePool is a mean over the spatial axes: mpc.ReduceGrad with
// mean = 1.
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"

namespace mpc {
namespace {

/// The forward node's attributes named in `names`, copied.
GradientContext::Attrs copyAttrs(const Node &n,
                                 std::initializer_list<const char *> names) {
  GradientContext::Attrs attrs;
  for (const char *name : names)
    if (const Attribute *a = n.attr(name))
      attrs.push_back({name, *a});
  return attrs;
}

} // namespace

void gradMaxPool(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *x = ctx.in(0), *dY = ctx.outGrad(0);
  ctx.setInputGrad(
      0, ctx.emitShapedLike("MaxPoolGrad", {dY, x},
                            copyAttrs(n, {"auto_pad", "ceil_mode", "dilations",
                                          "kernel_shape", "pads", "strides"}),
                            dY->dtype, *x, ctx.gradName(0), kMpcDomain));
}

void gradAveragePool(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *x = ctx.in(0), *dY = ctx.outGrad(0);
  ctx.setInputGrad(
      0, ctx.emitShapedLike(
             "AveragePoolGrad", {dY, ctx.shapeOf(x)},
             copyAttrs(n, {"auto_pad", "ceil_mode", "count_include_pad",
                           "dilations", "kernel_shape", "pads", "strides"}),
             dY->dtype, *x, ctx.gradName(0), kMpcDomain));
}

void gradGlobalAveragePool(GradientContext &ctx) {
  Value *x = ctx.in(0), *dY = ctx.outGrad(0);
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < ctx.rankOf(*x); ++d)
    axes.push_back(d);
  ctx.setInputGrad(0, ctx.emitShapedLike("ReduceGrad", {dY, x},
                                         {{"axes", Attribute::ofInts(axes)},
                                          {"keepdims", Attribute::ofInt(1)},
                                          {"mean", Attribute::ofInt(1)}},
                                         dY->dtype, *x, ctx.gradName(0),
                                         kMpcDomain));
}

} // namespace mpc
