// Gradient rules of data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze,
// Transpose and Concat.
//
// These ops only move elements, so their gradients move the gradient back:
// reshape it to the input's shape (a constant shape when it is static, the
// input's Shape at run time when not), transpose it by the inverse
// permutation, slice each input's part out of a Concat's gradient.
#include "passes/gradients/gradient_rules.h"

#include "support/diagnostics.h"

namespace mpc {

void gradReshapeLike(GradientContext &ctx) {
  ctx.setInputGrad(0,
                   ctx.reshapeLike(ctx.outGrad(0), ctx.in(0), ctx.gradName(0)));
}

/// Trilu keeps some elements and zeroes the rest, so the gradient is the
/// same Trilu of dY (same k, same side).
void gradTrilu(GradientContext &ctx) {
  Value *x = ctx.in(0);
  Value *dY = ctx.outGrad(0);
  std::vector<Value *> ins = {dY};
  if (ctx.node().numInputs() > 1 && ctx.node().input(1))
    ins.push_back(ctx.node().input(1));
  GradientContext::Attrs attrs;
  if (const Attribute *upper = ctx.node().attr("upper"))
    attrs.emplace_back("upper", *upper);
  ctx.setInputGrad(0, ctx.emitShapedLike("Trilu", ins, std::move(attrs),
                                         dY->dtype, *x, ctx.gradName(0)));
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

} // namespace mpc
