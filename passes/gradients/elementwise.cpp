// Gradient rules of elementwise ops: arithmetic with numpy broadcasting,
// unary math, Where, Trilu, Clip, Max, Min, Sum, Identity, Cast and CastLike.
//
// Broadcast inputs get their gradient summed back to their own shape with
// mpc.SumToShape; unary ops whose derivative is a function of the output
// (Exp, Sqrt) read the forward output, not the input, so the input need not
// stay alive for the backward. Max and Min split the gradient evenly among
// ties, as PyTorch's maximum/minimum do. The step functions (Floor, Ceil,
// Round, Sign) pass no gradient: registry.cpp lists them without a rule.
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "passes/gradients/rule_support.h"
#include "support/diagnostics.h"

#include <cmath>

namespace mpc {

void gradAdd(GradientContext &ctx) {
  Value *dY = ctx.outGrad(0);
  for (size_t i = 0; i < 2; ++i)
    if (ctx.wants(i))
      ctx.setInputGrad(i, ctx.sumToInputShape(dY, i));
}

void gradSub(GradientContext &ctx) {
  Value *dY = ctx.outGrad(0);
  if (ctx.wants(0))
    ctx.setInputGrad(0, ctx.sumToInputShape(dY, 0));
  if (ctx.wants(1)) {
    // Negate after the reduction: the reduced tensor is the smaller one.
    Value *s = ctx.sumToShape(dY, ctx.in(1), ctx.tempName("1_sum"));
    ctx.setInputGrad(1, ctx.unary("Neg", s, ctx.gradName(1)));
  }
}

void gradMul(GradientContext &ctx) {
  Value *dY = ctx.outGrad(0);
  for (size_t i = 0; i < 2; ++i) {
    if (!ctx.wants(i))
      continue;
    Value *other = ctx.in(1 - i);
    Value *full = ctx.mul(dY, other, ctx.preSumName(i, dY->dims));
    ctx.setInputGrad(i, ctx.sumToInputShape(full, i));
  }
}

void gradDiv(GradientContext &ctx) {
  // Y = A / B: dA = dY / B, dB = -dY * A / B^2 = -(dY / B) * Y.
  Value *dY = ctx.outGrad(0);
  Value *b = ctx.in(1);
  Value *q = ctx.binary("Div", dY, b,
                        ctx.wants(1) ? ctx.tempName("quotient")
                                     : ctx.preSumName(0, dY->dims));
  if (ctx.wants(0))
    ctx.setInputGrad(0, ctx.sumToInputShape(q, 0));
  if (ctx.wants(1)) {
    Value *full = ctx.mul(q, ctx.out(0), ctx.tempName("1_full"));
    Value *s = ctx.sumToShape(full, b, ctx.tempName("1_sum"));
    ctx.setInputGrad(1, ctx.unary("Neg", s, ctx.gradName(1)));
  }
}

void gradNeg(GradientContext &ctx) {
  ctx.setInputGrad(0, ctx.unary("Neg", ctx.outGrad(0), ctx.gradName(0)));
}

void gradAbs(GradientContext &ctx) {
  // d|x| = sign(x): dY where x > 0, -dY where x < 0, and 0 at 0 (PyTorch's
  // abs backward).
  Value *x = ctx.in(0);
  Value *dY = ctx.outGrad(0);
  Value *zeroX = ctx.scalarConstant(x->dtype, 0.0, "zero");
  Value *zero = ctx.scalarConstant(dY->dtype, 0.0, "zero");
  Value *positive = ctx.emitShapedLike("Greater", {x, zeroX}, {}, DType::Bool,
                                       *x, ctx.tempName("positive"));
  Value *negative = ctx.emitShapedLike("Less", {x, zeroX}, {}, DType::Bool, *x,
                                       ctx.tempName("negative"));
  Value *minusDY = ctx.unary("Neg", dY, ctx.tempName("minus_dy"));
  Value *below = ctx.emit("Where", {negative, minusDY, zero}, {}, dY->dtype,
                          dY->dims, ctx.tempName("below"));
  ctx.setInputGrad(0, ctx.emit("Where", {positive, dY, below}, {}, dY->dtype,
                               dY->dims, ctx.gradName(0)));
}

void gradSqrt(GradientContext &ctx) {
  // d sqrt(x) = 1 / (2 sqrt(x)) = 1 / (2 Y).
  Value *y = ctx.out(0);
  Value *twoY = ctx.mul(y, ctx.scalarConstant(y->dtype, 2.0, "two"),
                        ctx.tempName("two_y"));
  ctx.setInputGrad(0, ctx.binary("Div", ctx.outGrad(0), twoY, ctx.gradName(0)));
}

void gradExp(GradientContext &ctx) { setUnaryGrad(ctx, ctx.out(0)); }

void gradLog(GradientContext &ctx) {
  ctx.setInputGrad(
      0, ctx.binary("Div", ctx.outGrad(0), ctx.in(0), ctx.gradName(0)));
}

void gradPow(GradientContext &ctx) {
  // Y = A ^ B: dA = dY * B * A^(B-1), dB = dY * Y * log(A).
  Value *dY = ctx.outGrad(0);
  Value *a = ctx.in(0);
  Value *b = ctx.in(1);
  if (ctx.wants(0)) {
    auto exps = constantDoubles(b);
    Value *deriv = nullptr;
    if (exps && exps->size() == 1) {
      // A constant scalar exponent folds into constants of A's dtype.
      double e = (*exps)[0];
      if (e == 1.0) {
        deriv = nullptr; // dA = dY (summed to A's shape below)
      } else if (e == 0.0) {
        // A^0 is constant; 0 * A^-1 would be NaN at A = 0.
        deriv = ctx.scalarConstant(a->dtype, 0.0, "zero");
      } else if (e == 2.0) {
        deriv = ctx.mul(a, ctx.scalarConstant(a->dtype, 2.0, "two"),
                        ctx.tempName("deriv"));
      } else {
        Value *p = ctx.binary("Pow", a,
                              ctx.scalarConstant(a->dtype, e - 1.0, "exp_m1"),
                              ctx.tempName("pow"));
        deriv = ctx.mul(p, ctx.scalarConstant(a->dtype, e, "exp"),
                        ctx.tempName("deriv"));
      }
    } else {
      // Pow allows an integer exponent with a float base.
      Value *bf =
          b->dtype == a->dtype
              ? b
              : ctx.emit("Cast", {b},
                         {{"to", Attribute::ofInt(toOnnxDataType(a->dtype))}},
                         a->dtype, b->dims, ctx.tempName("exp"));
      Value *bm1 =
          ctx.binary("Sub", bf, ctx.scalarConstant(a->dtype, 1.0, "one"),
                     ctx.tempName("exp_m1"));
      Value *p = ctx.binary("Pow", a, bm1, ctx.tempName("pow"));
      deriv = ctx.mul(p, bf, ctx.tempName("deriv"));
    }
    Value *full = deriv ? ctx.mul(dY, deriv, ctx.preSumName(0, dY->dims)) : dY;
    ctx.setInputGrad(0, ctx.sumToInputShape(full, 0));
  }
  if (ctx.wants(1)) {
    Value *logA = ctx.unary("Log", a, ctx.tempName("log_base"));
    Value *t = ctx.mul(ctx.out(0), logA, ctx.tempName("y_log_base"));
    Value *full = ctx.mul(dY, t, ctx.preSumName(1, dY->dims));
    ctx.setInputGrad(1, ctx.sumToInputShape(full, 1));
  }
}

void gradSin(GradientContext &ctx) {
  // d sin = cos(x).
  setUnaryGrad(ctx, ctx.unary("Cos", ctx.in(0), ctx.tempName("cos")));
}

void gradCos(GradientContext &ctx) {
  // d cos = -sin(x).
  Value *sin = ctx.unary("Sin", ctx.in(0), ctx.tempName("sin"));
  setUnaryGrad(ctx, ctx.unary("Neg", sin, ctx.tempName("deriv")));
}

void gradErf(GradientContext &ctx) {
  // d erf(x) = 2 / sqrt(pi) * exp(-x^2), as one mpc.ErfGrad: spelled as
  // Mul/Neg/Exp, autocast would make the Exp an fp32 island (exp overflows
  // fp16 in general) and widen the GELU backward of fp16 models to fp32.
  ctx.setInputGrad(0, ctx.emitMpc("ErfGrad", {ctx.outGrad(0), ctx.in(0)}, {},
                                  *ctx.in(0), ctx.gradName(0)));
}

void gradIdentity(GradientContext &ctx) { ctx.setInputGrad(0, ctx.outGrad(0)); }

void gradCast(GradientContext &ctx) {
  // The gradient goes back in the input's precision.
  Value *dY = ctx.outGrad(0);
  Value *x = ctx.in(0);
  if (dY->dtype == x->dtype) {
    ctx.setInputGrad(0, dY);
    return;
  }
  ctx.setInputGrad(
      0, ctx.emitLike("Cast", {dY},
                      {{"to", Attribute::ofInt(toOnnxDataType(x->dtype))}}, *x,
                      ctx.gradName(0)));
}

void gradWhere(GradientContext &ctx) {
  Value *cond = ctx.in(0);
  Value *dY = ctx.outGrad(0);
  Value *zero = ctx.scalarConstant(dY->dtype, 0.0, "zero");
  for (size_t i = 1; i <= 2; ++i) {
    if (!ctx.wants(i))
      continue;
    // The branch that was not selected gets 0 where the other one was.
    std::vector<Value *> ins = i == 1 ? std::vector<Value *>{cond, dY, zero}
                                      : std::vector<Value *>{cond, zero, dY};
    Value *full = ctx.emit("Where", ins, {}, dY->dtype, dY->dims,
                           ctx.preSumName(i, dY->dims));
    ctx.setInputGrad(i, ctx.sumToInputShape(full, i));
  }
}

void gradClip(GradientContext &ctx) {
  Node &n = ctx.node();
  std::vector<Value *> inputs = {ctx.outGrad(0), ctx.in(0)};
  GradientContext::Attrs attrs;
  if (ctx.opset() >= 11) {
    for (size_t i = 1; i < n.numInputs(); ++i)
      inputs.push_back(ctx.in(i));
  } else {
    for (const char *a : {"min", "max"})
      if (const Attribute *v = n.attr(a))
        attrs.push_back({a, *v});
  }
  ctx.setInputGrad(
      0, ctx.emitMpc("ClipGrad", inputs, attrs, *ctx.in(0), ctx.gradName(0)));
}

void gradMaxMin(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *dY = ctx.outGrad(0);
  if (n.numInputs() == 1) {
    ctx.setInputGrad(0, dY);
    return;
  }
  std::vector<Value *> inputs = {dY, ctx.out(0)};
  for (size_t i = 0; i < n.numInputs(); ++i)
    inputs.push_back(ctx.in(i));
  for (size_t i = 0; i < n.numInputs(); ++i) {
    if (!ctx.wants(i))
      continue;
    Value *full = ctx.emit("ExtremumGrad", inputs,
                           {{"index", Attribute::ofInt(int64_t(i))}}, dY->dtype,
                           dY->dims, ctx.preSumName(i, dY->dims), kMpcDomain);
    ctx.setInputGrad(i, ctx.sumToInputShape(full, i));
  }
}

void gradSum(GradientContext &ctx) {
  Value *dY = ctx.outGrad(0);
  for (size_t i = 0; i < ctx.node().numInputs(); ++i)
    if (ctx.wants(i))
      ctx.setInputGrad(i, ctx.sumToInputShape(dY, i));
}

void gradCastLike(GradientContext &ctx) {
  // As Cast: the gradient goes back in the input's precision.
  Value *dY = ctx.outGrad(0);
  Value *x = ctx.in(0);
  if (dY->dtype == x->dtype) {
    ctx.setInputGrad(0, dY);
    return;
  }
  ctx.setInputGrad(
      0, ctx.emitLike("Cast", {dY},
                      {{"to", Attribute::ofInt(toOnnxDataType(x->dtype))}}, *x,
                      ctx.gradName(0)));
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

} // namespace mpc
