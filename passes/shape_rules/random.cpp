// Shape rules of the random ops: RandomUniform, RandomNormal, their *Like
// forms, Bernoulli and Dropout (the step seed and the node's key;
// random_math.h), and mpc.DropoutGrad.
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"

namespace mpc::shape_rules {

namespace {

/// The output dtype of a random op: its `dtype` attribute, else `fallback`;
/// `floatOnly` (RandomUniform/Normal and their *Like forms) refuses others.
DType randomOutputDType(Ctx &c, DType fallback, bool floatOnly) {
  if (!c.n.hasAttr("dtype"))
    return fallback;
  int64_t onnx = c.intAttr("dtype", 1);
  auto t = fromOnnxDataType(int(onnx));
  if (!t || (floatOnly && !isFloating(*t)))
    fail([&] {
      errorAt(c.n) << "attribute 'dtype' = " << onnx << " is not "
                   << (floatOnly ? "a floating-point type mpc supports "
                                   "(float, float16, bfloat16, double)"
                                 : "a data type mpc supports");
    });
  return *t;
}

/// RandomUniform / RandomNormal: the `shape` attribute's dims.
void inferRandom(Ctx &c) {
  if (!c.n.attr("shape"))
    fail([&] { errorAt(c.n) << "attribute 'shape' is required"; });
  std::vector<int64_t> shape = c.intsAttr("shape");
  for (int64_t v : shape)
    if (v < 0)
      fail([&] {
        errorAt(c.n) << "shape " << intsText(shape) << " has a negative entry";
      });
  c.floatAttr("seed", 0.0f);
  c.set(0, shaped(randomOutputDType(c, DType::F32, true), toDims(shape)));
}

/// RandomUniformLike / RandomNormalLike: the input's shape; its dtype
/// unless `dtype` says otherwise. Bernoulli: the same, of probabilities.
void inferRandomLike(Ctx &c) {
  Value *x = c.req(0);
  bool bernoulli = c.n.opType() == "Bernoulli";
  if (bernoulli)
    c.requireFloat(0);
  c.floatAttr("seed", 0.0f);
  DType t = randomOutputDType(c, x->dtype, !bernoulli);
  if (!bernoulli && !c.n.hasAttr("dtype") && x->dtype != DType::Undefined &&
      !isFloating(x->dtype))
    fail([&] {
      errorAt(c.n) << "without a 'dtype' attribute the output takes the "
                      "input's type, which must be floating point, got "
                   << typeText(x);
    });
  c.setShapeOf(0, t, x);
}

void inferDropout(Ctx &c) {
  Value *x = c.req(0);
  c.requireFloat(0);
  if (c.opset >= 12) {
    if (c.n.hasAttr("ratio"))
      fail([&] {
        errorAt(c.n) << "takes 'ratio' as an input since opset 12, not an "
                        "attribute (model opset "
                     << c.opset << ")";
      });
    c.requireFloat(1);
    for (size_t i = 1; i <= 2; ++i) {
      const Value *v = c.opt(i);
      if (v && v->hasShape && v->rank() != 0)
        fail([&] {
          errorAt(c.n) << (i == 1 ? "ratio" : "training_mode") << " ("
                       << c.inputText(i) << ") must be a scalar, got "
                       << typeText(v);
        });
    }
    c.requireDType(2, DType::Bool);
    if (TensorPtr r = c.opt(1) ? constantValue(*c.opt(1)) : nullptr) {
      double ratio = r->getAsDouble(0);
      if (!(ratio >= 0 && ratio <= 1))
        fail([&] { errorAt(c.n) << "ratio must be in [0, 1], got " << ratio; });
    }
  } else if (c.n.numInputs() > 1) {
    fail([&] {
      errorAt(c.n)
          << "takes 'ratio' as an attribute before opset 12, not as an "
             "input (model opset "
          << c.opset << ")";
    });
  }
  c.intAttr("seed", 0);
  c.setLike(0, x);
  c.setShapeOf(1, DType::Bool, x);
}

void inferDropoutGrad(Ctx &c) {
  Value *dy = c.req(0);
  c.req(1);
  c.requireFloat(0);
  c.requireDType(1, DType::Bool);
  requireSameShape(c, 0, 1);
  if (c.opt(2))
    c.requireFloat(2);
  c.requireDType(3, DType::Bool);
  c.setLike(0, dy);
}

const OpRule kRules[] = {
    {"", "RandomUniform", 0, 0, 1, 1, inferRandom},
    {"", "RandomNormal", 0, 0, 1, 1, inferRandom},
    {"", "RandomUniformLike", 1, 1, 1, 1, inferRandomLike},
    {"", "RandomNormalLike", 1, 1, 1, 1, inferRandomLike},
    {"", "Bernoulli", 1, 1, 1, 1, inferRandomLike},
    {"", "Dropout", 1, 3, 1, 2, inferDropout},
    {kMpcDomain, "DropoutGrad", 2, 4, 1, 1, inferDropoutGrad},
};

} // namespace

RuleRows randomRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
