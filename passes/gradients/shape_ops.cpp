// Gradient rules of data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze,
// Transpose, Concat, Slice, Split and Expand.
//
// These ops only move elements, so their gradients move the gradient back:
// reshape it to the input's shape (a constant shape when it is static, the
// input's Shape at run time when not), transpose it by the inverse
// permutation, slice each input's part out of a Concat's gradient, move a
// Slice's gradient into zeros (mpc.SliceGrad), concatenate Split's, and sum
// Expand's back over the broadcast axes.
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "passes/gradients/rule_support.h"
#include "support/diagnostics.h"

namespace mpc {

void gradReshapeLike(GradientContext &ctx) {
  ctx.setInputGrad(0,
                   ctx.reshapeLike(ctx.outGrad(0), ctx.in(0), ctx.gradName(0)));
}

void gradTranspose(GradientContext &ctx) {
  Value *x = ctx.in(0);
  int64_t r = ctx.rankOf(*x);
  std::vector<int64_t> perm = ctx.node().attrInts("perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i)
      perm.push_back(i);
  if (int64_t(perm.size()) != r)
    errorAt(ctx.node()) << "perm has " << perm.size()
                        << " entries but the input has rank " << r;
  std::vector<int64_t> inverse(size_t(r), 0);
  for (int64_t i = 0; i < r; ++i) {
    int64_t p = perm[size_t(i)] < 0 ? perm[size_t(i)] + r : perm[size_t(i)];
    if (p < 0 || p >= r)
      errorAt(ctx.node()) << "perm entry " << perm[size_t(i)]
                          << " is out of range for rank " << r;
    inverse[size_t(p)] = i;
  }
  Value *dY = ctx.outGrad(0);
  ctx.setInputGrad(
      0, ctx.emitShapedLike(
             "Transpose", {dY},
             singleAttr("perm", Attribute::ofInts(std::move(inverse))),
             dY->dtype, *x, ctx.gradName(0)));
}

void gradConcat(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *dY = ctx.outGrad(0);
  int64_t r = ctx.rankOf(*dY);
  int64_t axis = n.attrInt("axis", 0);
  if (axis < 0)
    axis += r;
  if (axis < 0 || axis >= r)
    errorAt(n) << "axis " << n.attrInt("axis", 0)
               << " is out of range for rank " << r;

  // The last input whose gradient is wanted bounds the offsets we need.
  size_t last = 0;
  bool any = false;
  for (size_t i = 0; i < n.numInputs(); ++i)
    if (ctx.wants(i)) {
      last = i;
      any = true;
    }
  if (!any)
    return;
  bool isStatic = true;
  for (size_t i = 0; i <= last; ++i)
    isStatic &=
        ctx.rankOf(*ctx.in(i)) == r && ctx.in(i)->dims[size_t(axis)].isKnown();

  auto slice = [&](size_t i, Value *starts, Value *ends) {
    Value *dX;
    if (ctx.opset() >= 10) {
      dX = ctx.emitShapedLike(
          "Slice", {dY, starts, ends, ctx.int64Constant({axis}, "axes")}, {},
          dY->dtype, *ctx.in(i), ctx.gradName(i));
    } else {
      // Before opset 10 Slice takes its bounds as attributes (static only).
      auto s = constantInt64s(starts), e = constantInt64s(ends);
      dX = ctx.emitShapedLike("Slice", {dY},
                              {{"starts", Attribute::ofInts(*s)},
                               {"ends", Attribute::ofInts(*e)},
                               {"axes", Attribute::ofInts({axis})}},
                              dY->dtype, *ctx.in(i), ctx.gradName(i));
    }
    ctx.setInputGrad(i, dX);
  };

  if (isStatic) {
    int64_t offset = 0;
    for (size_t i = 0; i <= last; ++i) {
      int64_t len = ctx.in(i)->dims[size_t(axis)].value;
      if (ctx.wants(i)) {
        // Separate statements: argument order would make the output order
        // of the constants compiler-dependent.
        Value *starts = ctx.int64Constant({offset}, "starts");
        Value *ends = ctx.int64Constant({offset + len}, "ends");
        slice(i, starts, ends);
      }
      offset += len;
    }
    return;
  }
  if (ctx.opset() < 10)
    errorAt(n) << "the gradient of a Concat of dynamic sizes needs opset 10 "
                  "or newer (Slice with input bounds)";
  // Dynamic sizes: offsets from the inputs' run-time shapes.
  Value *axisIndex = ctx.int64Constant({axis}, "axis_index");
  Value *start = ctx.int64Constant({0}, "starts");
  for (size_t i = 0; i <= last; ++i) {
    Value *len = ctx.emit("Gather", {ctx.shapeOf(ctx.in(i)), axisIndex},
                          {{"axis", Attribute::ofInt(0)}}, DType::I64, {Dim(1)},
                          ctx.tempName("len"));
    Value *end = ctx.emit("Add", {start, len}, {}, DType::I64, {Dim(1)},
                          ctx.tempName("ends"));
    if (ctx.wants(i))
      slice(i, start, end);
    start = end;
  }
}

void gradSlice(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *data = ctx.in(0);
  Value *dY = ctx.outGrad(0);
  std::vector<Value *> inputs = {dY, data};
  GradientContext::Attrs attrs;
  if (ctx.opset() >= 10) {
    // starts, ends and the optional axes/steps keep their positions.
    for (size_t i = 1; i < n.numInputs(); ++i)
      inputs.push_back(ctx.in(i));
  } else {
    for (const char *a : {"starts", "ends", "axes"})
      if (const Attribute *v = n.attr(a))
        attrs.push_back({a, *v});
  }
  ctx.setInputGrad(0, ctx.emitShapedLike("SliceGrad", inputs, attrs, dY->dtype,
                                         *data, ctx.gradName(0), kMpcDomain));
}

void gradSplit(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *x = ctx.in(0);
  int64_t axis = normalizedAxis(ctx, *x, 0);
  DType t = DType::Undefined;
  for (size_t i = 0; i < n.numOutputs(); ++i)
    if (Value *g = ctx.outGrad(i))
      t = g->dtype;
  // Outputs no gradient flows into contribute zeros of their shape.
  std::vector<Value *> pieces;
  for (size_t i = 0; i < n.numOutputs(); ++i) {
    Value *g = ctx.outGrad(i);
    if (!g) {
      Value *out = ctx.out(i);
      if (!out)
        errorAt(n) << "output " << i
                   << " is omitted; mpc differentiates "
                      "Split only when every output is produced";
      Tensor zero(t, {1});
      g = ctx.emitShapedLike("ConstantOfShape", {ctx.shapeOf(out)},
                             {{"value", Attribute::ofTensor(zero)}}, t, *out,
                             ctx.tempName("zeros"));
    }
    pieces.push_back(g);
  }
  ctx.setInputGrad(0, ctx.emitShapedLike("Concat", pieces,
                                         {{"axis", Attribute::ofInt(axis)}}, t,
                                         *x, ctx.gradName(0)));
}

void gradExpand(GradientContext &ctx) {
  ctx.setInputGrad(0, ctx.sumToInputShape(ctx.outGrad(0), 0));
}

} // namespace mpc
