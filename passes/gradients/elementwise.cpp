// Gradient rules of elementwise ops: arithmetic with numpy broadcasting,
// activations and unary math, Identity and Cast.
//
// Broadcast inputs get their gradient summed back to their own shape with
// mpc.SumToShape; activations whose derivative is a function of the output
// (Relu, Exp, Tanh, Sigmoid, Sqrt) read the forward output, not the input,
// so the input need not stay alive for the backward.
#include "passes/gradients/gradient_rules.h"

#include "support/diagnostics.h"

#include <cmath>

namespace mpc {
namespace {

/// dY * (d output / d input 0) for unary ops where that derivative is
/// `deriv`: the common tail of the unary rules.
void setUnaryGrad(GradientContext &ctx, Value *deriv) {
  ctx.setInputGrad(0, ctx.mul(ctx.outGrad(0), deriv, ctx.gradName(0)));
}

} // namespace

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

void gradRelu(GradientContext &ctx) {
  ctx.setInputGrad(0, ctx.emitMpc("ReluGrad", {ctx.outGrad(0), ctx.out(0)}, {},
                                  *ctx.in(0), ctx.gradName(0)));
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

void gradTanh(GradientContext &ctx) {
  // d tanh = 1 - Y^2.
  Value *y = ctx.out(0);
  Value *yy = ctx.mul(y, y, ctx.tempName("y_sq"));
  Value *deriv = ctx.binary("Sub", ctx.scalarConstant(y->dtype, 1.0, "one"), yy,
                            ctx.tempName("deriv"));
  setUnaryGrad(ctx, deriv);
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

void gradSigmoid(GradientContext &ctx) {
  // d sigmoid = Y (1 - Y).
  Value *y = ctx.out(0);
  Value *om = ctx.binary("Sub", ctx.scalarConstant(y->dtype, 1.0, "one"), y,
                         ctx.tempName("one_minus_y"));
  setUnaryGrad(ctx, ctx.mul(y, om, ctx.tempName("deriv")));
}

void gradErf(GradientContext &ctx) {
  // d erf(x) = 2 / sqrt(pi) * exp(-x^2), as one mpc.ErfGrad: spelled as
  // Mul/Neg/Exp, autocast would make the Exp an fp32 island (exp overflows
  // fp16 in general) and widen the GELU backward of fp16 models to fp32.
  ctx.setInputGrad(0, ctx.emitMpc("ErfGrad", {ctx.outGrad(0), ctx.in(0)}, {},
                                  *ctx.in(0), ctx.gradName(0)));
}

void gradLogSigmoid(GradientContext &ctx) {
  // d log sigmoid(x) = sigmoid(-x), as one mpc.LogSigmoidGrad from X: from
  // Y it would be 1 - exp(Y), which cancels where Y is near 0 (x >> 0).
  ctx.setInputGrad(0, ctx.emitMpc("LogSigmoidGrad", {ctx.outGrad(0), ctx.in(0)},
                                  {}, *ctx.in(0), ctx.gradName(0)));
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

} // namespace mpc
