// Shape rules of the fused ops the fusion passes emit, one kernel where the
// model had several ops: mpc.Gelu / mpc.GeluTanh (passes/fuse_gelu.cpp),
// mpc.FusedMatMul (passes/fold_transpose.cpp), and the softmax forms with a
// widening cast or a one-element divisor folded in, mpc.SoftmaxTo,
// mpc.DivSoftmaxTo, mpc.SoftmaxGradAs and mpc.SoftmaxGradDiv, and the add
// with its casts, mpc.AddTo (passes/fold_widening_casts.cpp); semantics in
// ir/mpc_ops.h.
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"

#include <optional>

namespace mpc::shape_rules {

namespace {

/// mpc.Gelu, mpc.GeluTanh: elementwise on a float tensor. Unlike ONNX's Gelu
/// they exist at every opset: they are what opset < 20 models fuse into.
void inferGelu(Ctx &c) {
  c.requireFloat(0);
  c.setLike(0, c.req(0));
}

/// transA / transB must be 0 or 1 (the kernels read them as flags).
bool transFlag(Ctx &c, const char *name) {
  int64_t v = c.intAttr(name, 0);
  if (v != 0 && v != 1)
    fail([&] {
      errorAt(c.n) << "attribute '" << name << "' must be 0 or 1, got " << v;
    });
  return v != 0;
}

/// mpc.FusedMatMul(A, B) <transA, transB>: MatMul(op(A), op(B)) where op
/// swaps the last two axes when its flag is set; both operands have rank
/// >= 2 (the pass folds only swaps of two axes), batches broadcast.
void inferFusedMatMul(Ctx &c) {
  Value *a = c.req(0);
  Value *b = c.req(1);
  c.sameDType({0, 1});
  c.requireFloat(0);
  bool ta = transFlag(c, "transA"), tb = transFlag(c, "transB");
  if ((a->hasShape && a->rank() < 2) || (b->hasShape && b->rank() < 2))
    fail([&] {
      errorAt(c.n) << "inputs must have rank >= 2, got " << typeText(a)
                   << " and " << typeText(b);
    });
  if (!a->hasShape || !b->hasShape) {
    c.set(0, unranked(a->dtype));
    return;
  }
  size_t ra = a->dims.size(), rb = b->dims.size();
  const Dim &m = a->dims[ta ? ra - 1 : ra - 2];
  const Dim &ka = a->dims[ta ? ra - 2 : ra - 1];
  const Dim &kb = b->dims[tb ? rb - 1 : rb - 2];
  const Dim &n = b->dims[tb ? rb - 2 : rb - 1];
  if (dimsConflict(ka, kb))
    fail([&] {
      errorAt(c.n) << "inner dimensions differ: " << typeText(a)
                   << (ta ? " (transposed)" : "") << " x " << typeText(b)
                   << (tb ? " (transposed)" : "") << " (" << ka.value << " vs "
                   << kb.value << ")";
    });
  InlineDims out;
  c.broadcastInto(a->dims.data(), ra - 2, b->dims.data(), rb - 2, out);
  out.push_back(m);
  out.push_back(n);
  c.setShaped(0, a->dtype, out);
}

/// mpc.SoftmaxGradAs: SoftmaxGrad with dX of Y's dtype; dY is widened
/// exactly to it (passes/fold_widening_casts.cpp).
void inferSoftmaxGradAs(Ctx &c) {
  inferElementwiseGrad(c);
  Value *dy = c.req(0);
  Value *y = c.req(1);
  c.requireFloat(1);
  if (dy->dtype != DType::Undefined && y->dtype != DType::Undefined &&
      dy->dtype != y->dtype && !widensExactly(dy->dtype, y->dtype))
    fail([&] {
      errorAt(c.n) << "Y (" << dtypeName(y->dtype)
                   << ") must be a float type at least as wide as dY ("
                   << dtypeName(dy->dtype) << ")";
    });
  c.setShapeOf(0, y->dtype, dy->hasShape ? dy : y);
}

/// The divisor D of SoftmaxGradDiv / DivSoftmaxTo: one element of `of`'s
/// dtype and of rank at most its rank (so the Div keeps its shape).
void requireOneElementOf(Ctx &c, const Value *d, const Value *of,
                         const char *what) {
  if (d->dtype != DType::Undefined && of->dtype != DType::Undefined &&
      d->dtype != of->dtype)
    fail([&] {
      errorAt(c.n) << "D (" << dtypeName(d->dtype) << ") must have " << what
                   << "'s dtype (" << dtypeName(of->dtype) << ")";
    });
  bool single = true;
  for (const Dim &k : d->dims)
    single = single && k.isKnown() && k.value == 1;
  if (d->hasShape && (!single || (of->hasShape && d->rank() > of->rank())))
    fail([&] {
      errorAt(c.n) << "D must be one element of rank at most " << what
                   << "'s, got " << dimsToString(d->dims);
    });
}

/// mpc.SoftmaxGradDiv: SoftmaxGradAs divided by the one-element D (Y's
/// dtype) and cast to `to`.
void inferSoftmaxGradDiv(Ctx &c) {
  inferSoftmaxGradAs(c);
  Value *y = c.req(1);
  requireOneElementOf(c, c.req(2), y, "Y");
  DType t = c.floatTypeAttr("to");
  Value *dy = c.n.input(0);
  c.setShapeOf(0, t, dy->hasShape ? dy : y);
}

/// mpc.SoftmaxTo: Softmax of X widened exactly to `to` (a float type at
/// least as wide as X's), Y in that type; Ylow (optional) Y cast to `low`.
void inferSoftmaxTo(Ctx &c) {
  Value *x = c.req(0);
  c.requireFloat(0);
  int64_t to = c.requiredIntAttr("to");
  auto t = fromOnnxDataType(int(to));
  if (!t || !isFloating(*t) ||
      (x->dtype != DType::Undefined && x->dtype != *t &&
       !widensExactly(x->dtype, *t)))
    fail([&] {
      errorAt(c.n) << "attribute 'to' = " << to
                   << " must be a float type at least as wide as X ("
                   << dtypeName(x->dtype) << ")";
    });
  if (x->hasShape)
    c.axis(c.intAttr("axis", -1), x->rank());
  c.setShapeOf(0, *t, x);
  // The optional Ylow: Y cast down to `low` (default fp16) for the next
  // matrix product.
  if (c.n.output(1))
    c.setShapeOf(1, c.floatTypeAttr("low", DType::F16), x);
}

/// mpc.DivSoftmaxTo: SoftmaxTo of X divided by the one-element D (X's
/// dtype).
void inferDivSoftmaxTo(Ctx &c) {
  inferSoftmaxTo(c);
  Value *x = c.req(0);
  Value *d = c.req(1);
  requireOneElementOf(c, d, x, "X");
}

/// mpc.AddTo: A + B of one shape, each fp32, fp16 or bf16, added in fp32
/// and stored in `to` (fp32, fp16 or bf16); Clow (optional) C cast to
/// `low`.
void inferAddTo(Ctx &c) {
  Value *a = c.req(0);
  c.req(1);
  for (size_t i : {size_t(0), size_t(1)}) {
    const Value *v = c.n.input(i);
    if (v->dtype != DType::Undefined && v->dtype != DType::F32 &&
        v->dtype != DType::F16 && v->dtype != DType::BF16)
      fail([&] {
        errorAt(c.n) << c.inputText(i) << " is " << dtypeName(v->dtype)
                     << "; mpc.AddTo adds fp32, fp16 or bf16";
      });
  }
  requireSameShape(c, 0, 1);
  auto narrow = [&](const char *name, std::optional<DType> dflt, bool fp32) {
    DType t = c.floatTypeAttr(name, dflt);
    if (t != DType::F16 && t != DType::BF16 && !(fp32 && t == DType::F32))
      fail([&] {
        errorAt(c.n) << "attribute '" << name << "' is " << dtypeName(t)
                     << "; mpc.AddTo writes "
                     << (fp32 ? "fp32, fp16 or bf16" : "fp16 or bf16");
      });
    return t;
  };
  c.setShapeOf(0, narrow("to", std::nullopt, true), a);
  if (c.n.numOutputs() > 1 && c.n.output(1))
    c.setShapeOf(1, narrow("low", DType::F16, false), a);
}

const OpRule kRules[] = {
    {kMpcDomain, "AddTo", 2, 2, 1, 2, inferAddTo},
    {kMpcDomain, "Gelu", 1, 1, 1, 1, inferGelu},
    {kMpcDomain, "GeluTanh", 1, 1, 1, 1, inferGelu},
    {kMpcDomain, "FusedMatMul", 2, 2, 1, 1, inferFusedMatMul},
    {kMpcDomain, "SoftmaxTo", 1, 1, 1, 2, inferSoftmaxTo},
    {kMpcDomain, "DivSoftmaxTo", 2, 2, 1, 2, inferDivSoftmaxTo},
    {kMpcDomain, "SoftmaxGradAs", 2, 2, 1, 1, inferSoftmaxGradAs},
    {kMpcDomain, "SoftmaxGradDiv", 3, 3, 1, 1, inferSoftmaxGradDiv},
};

} // namespace

RuleRows fusedRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
