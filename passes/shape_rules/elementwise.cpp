// Shape rules of the elementwise ops: ONNX's unary and binary arithmetic,
// comparisons, logic, casts, Where, Clip, Trilu's mask and the variadic
// Max/Min/Sum (numpy broadcasting), and the mpc backward ops of Erf, Clip and
// Max/Min. Also the rules other categories share for ops that keep their
// input's type and shape: inferUnaryNumeric, inferUnaryFloat and
// inferElementwiseGrad (rule_support.h).
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"

namespace mpc::shape_rules {

void inferUnaryNumeric(Ctx &c) {
  c.requireNumeric(0);
  c.setLike(0, c.req(0));
}

void inferUnaryFloat(Ctx &c) {
  c.requireFloat(0);
  c.setLike(0, c.req(0));
}

/// dX typed like dY (input 0), shaped like dY unified with input 1.
void inferElementwiseGrad(Ctx &c) {
  Value *dy = c.req(0);
  Value *y = c.req(1);
  c.requireFloat(0);
  requireSameShape(c, 0, 1);
  if (c.n.hasAttr("axis") && dy->hasShape)
    c.axis(c.intAttr("axis", -1), dy->rank());
  const Value *ref = dy->hasShape ? dy : y;
  c.setShapeOf(0, dy->dtype, ref);
}

namespace {

void inferIdentity(Ctx &c) { c.setLike(0, c.req(0)); }

void inferNot(Ctx &c) {
  c.requireDType(0, DType::Bool);
  c.setLike(0, c.req(0));
}

/// IsNaN, IsInf: a bool of X's shape for a floating-point X.
void inferFloatPredicate(Ctx &c) {
  Value *x = c.req(0);
  c.requireFloat(0);
  c.setShapeOf(0, DType::Bool, x);
}

/// And, Or, Xor: bool operands, broadcast.
void inferLogical(Ctx &c) {
  c.req(0);
  c.req(1);
  c.requireDType(0, DType::Bool);
  c.requireDType(1, DType::Bool);
  c.setBroadcast(DType::Bool, {0, 1});
}

void inferBinaryArith(Ctx &c) {
  Value *a = c.req(0);
  c.req(1);
  c.sameDType({0, 1});
  c.requireNumeric(0);
  c.requireNumeric(1);
  c.setBroadcast(a->dtype, {0, 1});
}

/// Mod: broadcast like Add; floating operands need fmod=1 (ONNX: the
/// integer remainder's sign rule, fmod=0, is undefined for floats).
void inferMod(Ctx &c) {
  inferBinaryArith(c);
  const Value *a = c.n.input(0);
  int64_t fmod = c.intAttr("fmod", 0);
  if (fmod != 0 && fmod != 1)
    fail([&] { errorAt(c.n) << "fmod must be 0 or 1, got " << fmod; });
  if (a->dtype != DType::Undefined && isFloating(a->dtype) && fmod == 0)
    fail([&] {
      errorAt(c.n) << "takes " << dtypeName(a->dtype)
                   << " operands only with fmod=1 (ONNX Mod)";
    });
}

/// Trilu(input, k?): the input's type; rank >= 2, k an int64 scalar.
void inferTrilu(Ctx &c) {
  Value *x = c.req(0);
  if (x->hasShape && x->rank() < 2)
    fail([&] {
      errorAt(c.n) << "input must have rank >= 2, got " << typeText(x);
    });
  if (const Value *k = c.opt(1)) {
    c.requireDType(1, DType::I64);
    if (k->hasShape && k->rank() != 0 &&
        !(k->rank() == 1 && k->dims[0].isKnown() && k->dims[0].value == 1))
      fail([&] {
        errorAt(c.n) << "k (" << c.inputText(1) << ") must be a scalar, got "
                     << typeText(k);
      });
  }
  c.setLike(0, x);
}

void inferPow(Ctx &c) {
  Value *base = c.req(0);
  c.req(1);
  c.requireNumeric(0);
  c.requireNumeric(1);
  c.setBroadcast(base->dtype, {0, 1});
}

void inferCompare(Ctx &c) {
  c.req(0);
  c.req(1);
  c.sameDType({0, 1});
  if (c.n.opType() != "Equal") {
    c.requireNumeric(0);
    c.requireNumeric(1);
  }
  c.setBroadcast(DType::Bool, {0, 1});
}

void inferWhere(Ctx &c) {
  c.req(0);
  Value *x = c.req(1);
  c.req(2);
  c.requireDType(0, DType::Bool);
  c.sameDType({1, 2});
  c.setBroadcast(x->dtype, {0, 1, 2});
}

void inferCast(Ctx &c) {
  const Value *x = c.req(0);
  int64_t to = c.requiredIntAttr("to");
  auto t = fromOnnxDataType(int(to));
  if (!t)
    fail([&] {
      errorAt(c.n) << "attribute 'to' = " << to
                   << " is not a data type mpc supports (float, float16, "
                      "bfloat16, double, int64, int32, int8, uint8, bool)";
    });
  c.setShapeOf(0, *t, x);
}

void inferCastLike(Ctx &c) {
  Value *x = c.req(0);
  Value *like = c.req(1);
  if (c.opset < 15)
    fail([&] {
      errorAt(c.n) << "CastLike is an ONNX op from opset 15; the model imports "
                      "opset "
                   << c.opset;
    });
  c.setShapeOf(0, like->dtype, x);
}

void inferClip(Ctx &c) {
  Value *x = c.req(0);
  c.requireNumeric(0);
  if (c.opset >= 11) {
    if (c.n.hasAttr("min") || c.n.hasAttr("max"))
      fail([&] {
        errorAt(c.n) << "takes min and max as inputs since opset 11, not as "
                        "attributes (model opset "
                     << c.opset << ")";
      });
    c.sameDType({0, 1, 2});
    for (size_t i = 1; i <= 2; ++i) {
      const Value *b = c.opt(i);
      if (b && b->hasShape && b->rank() != 0 &&
          !(b->rank() == 1 && b->dims[0] == Dim(1)))
        fail([&] {
          errorAt(c.n) << (i == 1 ? "min" : "max") << " (" << c.inputText(i)
                       << ") must be a scalar, got " << typeText(b);
        });
    }
  } else {
    if (c.n.numInputs() > 1)
      fail([&] {
        errorAt(c.n) << "takes min and max as attributes before opset 11, not "
                        "as inputs (model opset "
                     << c.opset << ")";
      });
    c.floatAttr("min", 0.0f);
    c.floatAttr("max", 0.0f);
  }
  c.setLike(0, x);
}

/// Max, Min, Sum: one or more inputs of one numeric dtype, broadcast.
void inferVariadic(Ctx &c) {
  for (size_t i = 0; i < c.n.numInputs(); ++i) {
    c.req(i);
    c.requireNumeric(i);
    c.sameDType({0, i});
  }
  Value *first = c.req(0);
  Dims out;
  for (size_t i = 0; i < c.n.numInputs(); ++i) {
    const Dims *d = dimsOf(c.n.input(i));
    if (!d) {
      c.set(0, unranked(first->dtype));
      return;
    }
    out = c.broadcast(out, *d);
  }
  c.set(0, shaped(first->dtype, out));
}

void inferClipGrad(Ctx &c) {
  c.req(1);
  c.sameDType({1, 2, 3});
  DType t = c.n.input(1)->dtype;
  for (size_t i = 2; i <= 3; ++i)
    if (c.opt(i) && t != DType::Undefined)
      requireScalar(c, i, t, i == 2 ? "min" : "max");
  inferElementwiseGrad(c);
}

void inferExtremumGrad(Ctx &c) {
  Value *dy = c.req(0);
  c.req(1);
  c.requireFloat(0);
  requireSameShape(c, 0, 1);
  for (size_t i = 2; i < c.n.numInputs(); ++i) {
    c.req(i);
    c.sameDType({1, i});
  }
  int64_t inputs = int64_t(c.n.numInputs()) - 2;
  int64_t index = c.requiredIntAttr("index");
  if (index < 0 || index >= inputs)
    fail([&] {
      errorAt(c.n) << "index " << index << " is out of range for " << inputs
                   << " forward inputs";
    });
  const Value *ref = dy->hasShape ? dy : c.n.input(1);
  c.setShapeOf(0, dy->dtype, ref);
}

const OpRule kRules[] = {
    {"", "Abs", 1, 1, 1, 1, inferUnaryNumeric},
    {"", "Add", 2, 2, 1, 1, inferBinaryArith},
    {"", "Cast", 1, 1, 1, 1, inferCast},
    {"", "Div", 2, 2, 1, 1, inferBinaryArith},
    {"", "Equal", 2, 2, 1, 1, inferCompare},
    {"", "Erf", 1, 1, 1, 1, inferUnaryNumeric},
    {"", "Exp", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Greater", 2, 2, 1, 1, inferCompare},
    {"", "Identity", 1, 1, 1, 1, inferIdentity},
    {"", "Less", 2, 2, 1, 1, inferCompare},
    {"", "Log", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Mod", 2, 2, 1, 1, inferMod},
    {"", "Mul", 2, 2, 1, 1, inferBinaryArith},
    {"", "Neg", 1, 1, 1, 1, inferUnaryNumeric},
    {"", "Sign", 1, 1, 1, 1, inferUnaryNumeric},
    {"", "Not", 1, 1, 1, 1, inferNot},
    {"", "IsNaN", 1, 1, 1, 1, inferFloatPredicate},
    {"", "IsInf", 1, 1, 1, 1, inferFloatPredicate},
    {"", "And", 2, 2, 1, 1, inferLogical},
    {"", "Or", 2, 2, 1, 1, inferLogical},
    {"", "Xor", 2, 2, 1, 1, inferLogical},
    {"", "LessOrEqual", 2, 2, 1, 1, inferCompare},
    {"", "GreaterOrEqual", 2, 2, 1, 1, inferCompare},
    {"", "Sin", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Floor", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Ceil", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Round", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Cos", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Pow", 2, 2, 1, 1, inferPow},
    {"", "Sqrt", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Sub", 2, 2, 1, 1, inferBinaryArith},
    {"", "Where", 3, 3, 1, 1, inferWhere},
    {"", "Trilu", 1, 2, 1, 1, inferTrilu},
    {"", "CastLike", 2, 2, 1, 1, inferCastLike},
    {"", "Clip", 1, 3, 1, 1, inferClip},
    {"", "Max", 1, kAny, 1, 1, inferVariadic},
    {"", "Min", 1, kAny, 1, 1, inferVariadic},
    {"", "Sum", 1, kAny, 1, 1, inferVariadic},
    {kMpcDomain, "ClipGrad", 2, 4, 1, 1, inferClipGrad},
    {kMpcDomain, "ExtremumGrad", 3, kAny, 1, 1, inferExtremumGrad},
    {kMpcDomain, "ErfGrad", 2, 2, 1, 1, inferElementwiseGrad},
};

} // namespace

RuleRows elementwiseRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
