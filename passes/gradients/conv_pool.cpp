// Gradient rules of the convolutions and the pools: Conv, ConvTranspose,
// MaxPool, AveragePool and GlobalAveragePool.
//
// Conv: dX = mpc.ConvGradInput(dY, W, shape(X)) and dW = mpc.ConvGradWeight(
// dY, X), both carrying the forward node's window attributes so that they
// resolve the window (auto_pad included) exactly as the forward did; dB sums
// dY over every axis but the channels. ConvTranspose is the data gradient of
// a convolution, so its own gradients are that convolution: dX = Conv(dY, W)
// and dW = mpc.ConvGradWeight(X, dY) with the roles of input and output
// swapped, under the ConvTranspose's resolved (explicit) pads.
//
// MaxPool and AveragePool get their own backward ops (mpc.MaxPoolGrad,
// mpc.AveragePoolGrad) that take the forward node's window attributes and
// resolve the window as the forward did; MaxPoolGrad re-finds each window's
// maximum in X rather than reading the optional Indices output, so models
// that do not ask for Indices (the exporter's) need nothing extra.
// GlobalAveragePool is a mean over the spatial axes: mpc.ReduceGrad with
// mean = 1.
#include "passes/gradients/gradient_rules.h"

#include "ir/builder.h"

#include "ir/mpc_ops.h"
#include "ir/window_geometry.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

/// The kernel sizes of W (dims 2...), which must be known.
std::vector<int64_t> kernelOf(GradientContext &ctx, const Value &w) {
  int64_t r = ctx.rankOf(w);
  std::vector<int64_t> k;
  for (int64_t d = 2; d < r; ++d) {
    if (!w.dims[size_t(d)].isKnown())
      errorAt(ctx.node()) << "the kernel size of '" << w.name()
                          << "' must be static to differentiate, got "
                          << w.typeString();
    k.push_back(w.dims[size_t(d)].value);
  }
  return k;
}

/// The forward node's window attributes, plus kernel_shape from W.
GradientContext::Attrs windowAttrs(const Node &n,
                                   const std::vector<int64_t> &kernel) {
  GradientContext::Attrs attrs;
  for (const char *name : {"auto_pad", "dilations", "group", "pads", "strides"})
    if (const Attribute *a = n.attr(name))
      attrs.push_back({name, *a});
  attrs.push_back({"kernel_shape", Attribute::ofInts(kernel)});
  return attrs;
}

/// dB = sum of dY over every axis but axis 1, shaped like B.
Value *biasGrad(GradientContext &ctx, Value *dY, Value *b) {
  std::vector<int64_t> axes = axesButChannel(ctx.rankOf(*dY));
  GradientContext::Attrs attrs = {{"keepdims", Attribute::ofInt(0)}};
  std::vector<Value *> inputs = {dY};
  if (ctx.opset() >= 13)
    inputs.push_back(ctx.int64Constant(axes, "bias_axes"));
  else
    attrs.push_back({"axes", Attribute::ofInts(axes)});
  return ctx.emit("ReduceSum", inputs, attrs, dY->dtype, b->dims,
                  ctx.gradName(2));
}

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

void gradConv(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *x = ctx.in(0), *w = ctx.in(1), *dY = ctx.outGrad(0);
  GradientContext::Attrs attrs = windowAttrs(n, kernelOf(ctx, *w));
  if (ctx.wants(0))
    ctx.setInputGrad(
        0, ctx.emitShapedLike("ConvGradInput", {dY, w, ctx.shapeOf(x)}, attrs,
                              dY->dtype, *x, ctx.gradName(0), kMpcDomain));
  if (ctx.wants(1))
    ctx.setInputGrad(1, ctx.emitShapedLike("ConvGradWeight", {dY, x}, attrs,
                                           dY->dtype, *w, ctx.gradName(1),
                                           kMpcDomain));
  if (ctx.wants(2))
    ctx.setInputGrad(2, biasGrad(ctx, dY, ctx.in(2)));
}

void gradConvTranspose(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *x = ctx.in(0), *w = ctx.in(1), *dY = ctx.outGrad(0);
  std::vector<int64_t> kernel = kernelOf(ctx, *w);
  size_t r = kernel.size();
  std::vector<int64_t> in;
  for (size_t d = 0; d < r; ++d) {
    const Dim &dim = x->dims[d + 2];
    in.push_back(dim.isKnown() ? dim.value : -1);
  }
  WindowAttrs a = readWindowAttrs(n, WindowKind::Conv, r, kernel);
  WindowGeometry g = resolveTransposedWindow(n, a, in);
  std::vector<int64_t> pads = g.padBegin;
  pads.insert(pads.end(), g.padEnd.begin(), g.padEnd.end());
  bool derivedPads = a.autoPad == "SAME_UPPER" || a.autoPad == "SAME_LOWER" ||
                     n.hasAttr("output_shape");
  for (size_t d = 0; d < r; ++d)
    if (derivedPads && (in[d] < 0 || kernel[d] < 0))
      errorAt(n) << "the spatial sizes of '" << x->name()
                 << "' must be static to differentiate a ConvTranspose with "
                    "auto_pad or output_shape, got "
                 << x->typeString();
  // Negative pads (an output larger than the computed values, zero-filled)
  // have no Conv to express the data gradient with.
  for (size_t d = 0; d < r; ++d)
    if (g.padBegin[d] < 0 || g.padEnd[d] < 0)
      errorAt(n) << "no gradient for an output size beyond what the input, "
                    "kernel and output_padding produce (negative padding in "
                    "spatial dim "
                 << d << ")";
  // The gradients are convolutions over the output: their window must map
  // the output size back onto exactly the input size, which output_padding
  // >= stride (allowed when smaller than the dilation) breaks.
  WindowAttrs convA = a;
  convA.autoPad = "NOTSET";
  convA.pads = pads;
  WindowGeometry back = resolveWindow(n, convA, g.in);
  for (size_t d = 0; d < r; ++d)
    if (in[d] >= 0 && back.out[d] != in[d])
      errorAt(n) << "no gradient for output_padding >= stride (spatial dim "
                 << d << ")";
  GradientContext::Attrs attrs = {{"dilations", Attribute::ofInts(a.dilations)},
                                  {"group", Attribute::ofInt(a.group)},
                                  {"kernel_shape", Attribute::ofInts(kernel)},
                                  {"pads", Attribute::ofInts(pads)},
                                  {"strides", Attribute::ofInts(a.strides)}};
  if (ctx.wants(0))
    ctx.setInputGrad(0, ctx.emitShapedLike("Conv", {dY, w}, attrs, dY->dtype,
                                           *x, ctx.gradName(0)));
  if (ctx.wants(1))
    ctx.setInputGrad(1, ctx.emitShapedLike("ConvGradWeight", {x, dY}, attrs,
                                           dY->dtype, *w, ctx.gradName(1),
                                           kMpcDomain));
  if (ctx.wants(2))
    ctx.setInputGrad(2, biasGrad(ctx, dY, ctx.in(2)));
}

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
