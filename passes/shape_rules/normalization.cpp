// Shape rules of the normalizations: LayerNormalization, mpc.RMSNormalization
// and BatchNormalization (inference and training mode, by opset), and their
// mpc backward ops (LayerNormalizationGrad, RMSNormalizationGrad,
// BatchNormalizationGrad).
#include "passes/shape_rules/rule_support.h"

#include "ir/batch_norm_mode.h"
#include "ir/mpc_ops.h"

namespace mpc::shape_rules {

namespace {

/// The dtype of LayerNormalization's Mean/InvStdDev: stash_type 1 (fp32, the
/// only one mpc computes statistics in) for fp16/bf16/fp32 X, fp64 for fp64
/// X (statistics never narrower than X).
DType layerNormStatType(DType x) {
  return x == DType::F64 ? DType::F64 : DType::F32;
}

/// Checks that input i (Scale or B) broadcasts onto the normalised shape
/// X.dims[axis:] (given in place: [norm, norm + rank)) without adding axes
/// of its own.
void requireBroadcastsToNormalized(Ctx &c, size_t i, const Dim *norm,
                                   size_t rank) {
  const Value *v = c.opt(i);
  if (!v || !v->hasShape)
    return;
  bool ok = v->dims.size() <= rank;
  for (size_t k = 0; ok && k < v->dims.size(); ++k) {
    const Dim &d = v->dims[v->dims.size() - 1 - k];
    ok = d == Dim(1) || !dimsConflict(d, norm[rank - 1 - k]);
  }
  if (!ok)
    fail([&] {
      errorAt(c.n) << c.inputText(i) << " " << typeText(v)
                   << " does not broadcast to the normalised shape "
                   << dimsToString(Dims(norm, norm + rank));
    });
}

/// LayerNormalization (X, Scale, B) -> (Y, Mean, InvStdDev), or with `rms`
/// mpc.RMSNormalization (X, Scale) -> Y.
void inferNormalization(Ctx &c, bool rms) {
  Value *x = c.req(0);
  c.req(1);
  c.requireFloat(0);
  c.sameDType({0, 1, 2});
  if (!rms && c.opset < 17)
    fail([&] {
      errorAt(c.n) << "LayerNormalization is an ONNX op from opset 17; the "
                      "model imports opset "
                   << c.opset;
    });
  int64_t stash = c.intAttr("stash_type", 1);
  if (stash != 1)
    fail([&] {
      errorAt(c.n)
          << "stash_type " << stash
          << " is not supported (mpc computes layer-norm statistics in "
             "fp32, stash_type 1)";
    });
  c.floatAttr("epsilon", 1e-5f);
  DType stat = layerNormStatType(x->dtype);
  size_t stats = rms ? 0 : 2; // RMS has no statistics outputs
  if (!x->hasShape) {
    c.set(0, unranked(x->dtype));
    for (size_t i = 1; i <= stats; ++i)
      c.set(i, unranked(stat));
    return;
  }
  if (x->rank() == 0)
    fail([&] {
      errorAt(c.n) << "X (" << c.inputText(0) << ") must have rank >= 1";
    });
  int64_t axis = c.axis(c.intAttr("axis", -1), x->rank());
  const Dim *norm = x->dims.data() + axis;
  size_t normRank = x->dims.size() - size_t(axis);
  requireBroadcastsToNormalized(c, 1, norm, normRank);
  requireBroadcastsToNormalized(c, 2, norm, normRank);
  InlineDims statDims(x->dims.data(), x->dims.size());
  for (size_t i = size_t(axis); i < statDims.size(); ++i)
    statDims[i] = Dim(1);
  c.setLike(0, x);
  for (size_t i = 1; i <= stats; ++i)
    c.setShaped(i, stat, statDims);
}

void inferLayerNormalization(Ctx &c) { inferNormalization(c, false); }

/// mpc.LayerNormalizationTo (X, Scale, B) <to, low> -> (Y, Mean, InvStdDev
/// [, Ylow]): LayerNormalization with Y stored in `to` and, when asked for,
/// Ylow = Y cast to `low` (default fp16).
void inferNormalizationTo(Ctx &c, bool rms) {
  inferNormalization(c, rms);
  const size_t lowAt = size_t(lowCopyOutput(c.n.domain(), c.n.opType()));
  Value *x = c.n.input(0);
  c.setShapeOf(0, c.floatTypeAttr("to"), x);
  if (c.n.output(lowAt))
    c.setShapeOf(lowAt, c.floatTypeAttr("low", DType::F16), x);
}

void inferLayerNormalizationTo(Ctx &c) {
  c.req(2); // B: the body passes it on as it is
  inferNormalizationTo(c, false);
}

/// mpc.RMSNormalizationTo (X, Scale) <to, low> -> (Y [, Ylow]): the same
/// for mpc.RMSNormalization.
void inferRMSNormalizationTo(Ctx &c) { inferNormalizationTo(c, true); }

void inferRMSNormalization(Ctx &c) { inferNormalization(c, true); }

/// LayerNormalizationGrad (dY, X, scale, mean, inv_std) -> (dX, dScale,
/// dBias), or with `rms` RMSNormalizationGrad (dY, X, scale) -> (dX,
/// dScale).
void inferNormalizationGrad(Ctx &c, bool rms) {
  Value *dy = c.req(0);
  Value *x = c.req(1);
  size_t lastIn = rms ? 2 : 4, outs = rms ? 2 : 3;
  for (size_t i = 2; i <= lastIn; ++i)
    c.req(i);
  for (size_t i = 0; i <= lastIn; ++i)
    c.requireFloat(i);
  requireSameShape(c, 0, 1);
  // The results take X's dtype; dY may be narrower (read as stored and
  // widened exactly: an autocast island's fp16 gradient with its fp32 X).
  if (dy->dtype != DType::Undefined && x->dtype != DType::Undefined &&
      dy->dtype != x->dtype && !widensExactly(dy->dtype, x->dtype))
    fail([&] {
      errorAt(c.n) << "dY (" << c.inputText(0) << ") must be X's dtype "
                   << dtypeName(x->dtype) << " or a narrower float, got "
                   << dtypeName(dy->dtype);
    });
  const DType out = x->dtype != DType::Undefined ? x->dtype : dy->dtype;
  const Value *ref = dy->hasShape ? dy : x;
  if (!ref->hasShape) {
    for (size_t i = 0; i < outs; ++i)
      c.set(i, unranked(out));
    return;
  }
  if (ref->rank() == 0)
    fail([&] {
      errorAt(c.n) << "X (" << c.inputText(1) << ") must have rank >= 1";
    });
  int64_t axis = c.axis(c.intAttr("axis", -1), ref->rank());
  const Dim *norm = ref->dims.data() + axis;
  size_t normRank = ref->dims.size() - size_t(axis);
  requireBroadcastsToNormalized(c, 2, norm, normRank);
  c.setShapeOf(0, out, ref);
  for (size_t i = 1; i < outs; ++i)
    c.setShaped(i, out, norm, normRank);
}

void inferLayerNormalizationGrad(Ctx &c) { inferNormalizationGrad(c, false); }

void inferRMSNormalizationGrad(Ctx &c) { inferNormalizationGrad(c, true); }

/// A [C] per-channel input of BatchNormalization.
void requireChannelVector(Ctx &c, size_t i, const Dim &channels) {
  const Node &n = c.n;
  const Value *v = n.input(i);
  if (!v || !v->hasShape)
    return;
  if (v->rank() != 1)
    fail([&] {
      errorAt(n) << c.inputText(i) << " must be 1-D [C], got " << typeText(v);
    });
  requireEqualDims(n, v->dims[0], channels,
                   c.inputText(i) + " " + typeText(v) +
                       " must have one entry per channel");
}

void inferBatchNormalization(Ctx &c) {
  Node &n = c.n;
  Value *x = c.req(0);
  for (size_t i = 0; i < 5; ++i) {
    c.req(i);
    c.requireFloat(i);
  }
  c.sameDType({1, 2});
  c.sameDType({3, 4});
  if (x->hasShape && x->rank() < 2)
    fail([&] {
      errorAt(n) << "X (" << c.inputText(0)
                 << ") must have rank >= 2 ([N, C, ...]), got " << typeText(x);
    });
  if (c.opset >= 14) {
    int64_t t = n.attrInt("training_mode", 0);
    if (t != 0 && t != 1)
      fail([&] {
        errorAt(n) << "attribute 'training_mode' must be 0 or 1, got " << t;
      });
    if (n.numOutputs() > 3)
      fail([&] {
        errorAt(n) << "has " << n.numOutputs()
                   << " outputs, expected 1 to 3 from opset 14 (Y, "
                      "running_mean, running_var)";
      });
  } else if (n.hasAttr("training_mode")) {
    fail([&] {
      errorAt(n) << "attribute 'training_mode' exists from opset 14 (model "
                 << "opset " << c.opset << "); before, training mode means "
                 << "asking for the running-statistics outputs";
    });
  }
  // From opset 14 the attribute alone decides, and the running statistics
  // exist only in training mode; this keeps isBatchNormTraining (which
  // cannot see the opset) right for every node that passes here.
  if (c.opset >= 14 && n.attrInt("training_mode", 0) == 0)
    for (size_t i = 1; i < n.numOutputs(); ++i)
      if (n.output(i))
        fail([&] {
          errorAt(n) << "output " << i << " ('" << n.output(i)->name()
                     << "') exists only in training mode (training_mode = 1)";
        });
  bool training = isBatchNormTraining(n);
  Dim ch = dimOf(x, 1);
  for (size_t i = 1; i < 5; ++i)
    requireChannelVector(c, i, ch);
  if (training && x->hasShape) {
    // Values per channel: unknown past int64 (absurd dims claim nothing).
    Dim count = Dim(1);
    for (size_t d = 0; d < x->dims.size(); ++d) {
      int64_t product;
      if (d != 1)
        count = x->dims[d].isKnown() && count.isKnown() &&
                        !__builtin_mul_overflow(count.value, x->dims[d].value,
                                                &product)
                    ? Dim(product)
                    : Dim();
    }
    if (count == Dim(1))
      fail([&] {
        errorAt(n) << "training mode needs more than one value per channel, "
                   << "X is " << typeText(x) << " (as in PyTorch)";
      });
  }
  setOut(c, 0, x->dtype, x->hasShape ? &x->dims : nullptr);
  const Value *stats = n.input(3);
  if (!ch.isKnown() && stats->hasShape)
    ch = stats->dims[0];
  Dims vec = {ch};
  for (size_t i = 1; i < n.numOutputs(); ++i)
    if (n.output(i))
      setShapedOut(c, i, stats->dtype, vec);
}

void inferBatchNormalizationGrad(Ctx &c) {
  Node &n = c.n;
  Value *dy = c.req(0), *x = c.req(1), *scale = c.req(2);
  if (n.numInputs() == 4)
    fail([&] {
      errorAt(n) << "takes mean and var together (5 inputs) or neither (3), "
                 << "got 4 inputs";
    });
  for (size_t i = 0; i < n.numInputs(); ++i) {
    c.req(i);
    c.requireFloat(i);
  }
  if (n.numInputs() == 5)
    c.sameDType({3, 4});
  if (dy->hasShape && x->hasShape) {
    bool same = dy->rank() == x->rank();
    for (size_t d = 0; same && d < dy->dims.size(); ++d)
      same = !(dy->dims[d].isKnown() && x->dims[d].isKnown() &&
               dy->dims[d].value != x->dims[d].value);
    if (!same)
      fail([&] {
        errorAt(n) << "dY " << typeText(dy) << " and X " << typeText(x)
                   << " must have the same shape";
      });
  }
  if (x->hasShape && x->rank() < 2)
    fail([&] {
      errorAt(n) << "X (" << c.inputText(1)
                 << ") must have rank >= 2 ([N, C, ...]), got " << typeText(x);
    });
  Dim ch = dimOf(x, 1);
  for (size_t i = 2; i < n.numInputs(); ++i)
    requireChannelVector(c, i, ch);
  const Value *ref = x->hasShape ? x : dy;
  setOut(c, 0, dy->dtype, ref->hasShape ? &ref->dims : nullptr);
  if (!ch.isKnown() && scale->hasShape)
    ch = scale->dims[0];
  Dims vec = {ch};
  for (size_t i = 1; i < 3; ++i)
    if (n.output(i))
      setShapedOut(c, i, scale->dtype, vec);
}

const OpRule kRules[] = {
    {"", "LayerNormalization", 2, 3, 1, 3, inferLayerNormalization},
    {kMpcDomain, "LayerNormalizationTo", 3, 3, 1, 4, inferLayerNormalizationTo},
    {kMpcDomain, "RMSNormalization", 2, 2, 1, 1, inferRMSNormalization},
    {kMpcDomain, "RMSNormalizationTo", 2, 2, 1, 2, inferRMSNormalizationTo},
    {"", "BatchNormalization", 5, 5, 1, 5, inferBatchNormalization},
    {kMpcDomain, "LayerNormalizationGrad", 5, 5, 1, 3,
     inferLayerNormalizationGrad},
    {kMpcDomain, "RMSNormalizationGrad", 3, 3, 1, 2, inferRMSNormalizationGrad},
    {kMpcDomain, "BatchNormalizationGrad", 3, 5, 1, 3,
     inferBatchNormalizationGrad},
};

} // namespace

RuleRows normalizationRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
