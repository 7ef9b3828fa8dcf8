// fold-widening-casts: a gradient widened only to be summed is summed as it is
// stored.
//
// After autocast, the gradient of a Linear's bias is
//   dY32 = Cast<to = FLOAT>(dY16);  db = mpc.SumToShape(dY32, bias)
// because SumToShape is an fp32 reduction and the bias is an fp32 master
// parameter. The Cast materialises an fp32 copy of dY (batch x tokens x
// features, twice dY's bytes) only for the sum to read it once. SumToShapeAs
// (ir/mpc_ops.h) reads dY16, widens each element exactly and
// accumulates in the wide type in the same order, and writes X's dtype: the
// same bits, with neither the copy nor the pass over it. So
//
//   SumToShape(Cast<to = T>(h), X)  ->  mpc.SumToShapeAs(h, X)
//
// when the Cast widens exactly (fp16/bf16 -> fp32/fp64, fp32 -> fp64) and X
// has dtype T. Likewise the weight gradients: autocast keeps each gradient
// output in its parameter's fp32 with a Cast of the fp16 product, which
// mpc.UnscaleGradients then reads once; it reads fp16/bf16 gradients itself
// (widening exactly, writing fp32), so
//
//   UnscaleGradients(scale, ..., Cast<to = FLOAT>(g16), ...)
//     ->  UnscaleGradients(scale, ..., g16, ...)
//
// and no fp32 copy of every weight gradient exists next to the unscaled ones
// at the end of the backward. Without loss scaling (bf16) the optimizer
// reads the gradients itself, and mpc.SGD and mpc.Adam widen an fp16/bf16
// gradient as they load it (the arithmetic is fp32 either way), so
//
//   Adam(found_inf, step, p, Cast<to = FLOAT>(g16), m, v)
//     ->  Adam(found_inf, step, p, g16, m, v)        (SGD alike)
//
// and the fp32 copies of the weight gradients, all alive together at the
// end of the backward where the updates run, are not made. Autocast's fp32
// softmax island reads a widened copy of the fp16 scores, and its gradient a
// widened copy of the fp16 dY (attention: batch x heads x seq x seq each); both
// kernels widen as they read, so
//
//   Softmax<axis>(Cast<to = T>(h))        ->  mpc.SoftmaxTo<axis, to = T>(h)
//   mpc.SoftmaxGrad<axis>(Cast<to = T>(h), Y)
//                                         ->  mpc.SoftmaxGradAs<axis>(h, Y)
//
// (Y of dtype T), the same bits without the copies. The attention's scaling
// Div(scores, sqrt(d)) then meets the gradient as
//
//   Cast<to = T2>(Div(mpc.SoftmaxGradAs(dY, Y), D))
//                        ->  mpc.SoftmaxGradDiv<axis, to = T2>(dY, Y, D)
//
// (D one element of Y's dtype; the Cast when it is the Div's only reader),
// each value rounded where the nodes rounded it, without the fp32 gradient
// and its quotient; and in the forward
//
//   mpc.SoftmaxTo<axis, to>(Div(X, D))  ->  mpc.DivSoftmaxTo<axis, to>(X, D)
//
// (likewise a Softmax with its axis given, `to` then X's dtype), without
// the quotient. Last, the island's fp32 output cast down for the next
// matrix product is written by the island in the same pass, as its Ylow
// (or as Y itself when nothing else reads the fp32 one):
//
//   Cast<to = fp16>(Y = mpc.SoftmaxTo(...))  ->  mpc.SoftmaxTo<low>(...)'s Ylow
//
// Layer norm's (and RMS norm's) gradient is an fp32 island too: it reads
// the island's fp32 X and a widened copy of the fp16 gradient arriving from
// the next product; it widens dY as it reads it and writes X's dtype, so
//
//   mpc.LayerNormalizationGrad(Cast<to = T>(h), X, ...)
//                        ->  mpc.LayerNormalizationGrad(h, X, ...)
//
// (X of dtype T; RMSNormalizationGrad alike), the same bits without the
// copy.
//
// The norms' islands end in a Cast down too: a layer norm (or RMS norm)
// whose fp32 Y is cast to fp16/bf16 for the next product becomes one
//
//   mpc.LayerNormalizationTo<to, low>(X, Scale, B) -> (Y, Mean, InvStdDev
//                                                      [, Ylow])
//
// (mpc.RMSNormalizationTo<to, low>(X, Scale) -> (Y [, Ylow])): `to` the
// Cast's type when the Cast was Y's only reader (a pre-LN block), else Y
// stays fp32 and Ylow is the copy (a post-LN block's residual). A model's
// own Cast of an island's output to the same type (an identity once the
// export is fp32: `softmax(..., dtype=float32).to(dtype)`) is looked
// through first.
//
// The residual stream adds each block's fp16 output to the fp32 stream
// through a Cast up, and the backward's gradient sums (fp32) are cast down
// for the next products. Each such same-shape Add becomes one
//
//   mpc.AddTo<to, low>(A, B) -> (C [, Clow])
//
// reading a 16-bit operand as stored and adding in fp32, and writing the
// Cast down of the sum itself (`to` its type when it was the sum's only
// reader, else Clow beside the fp32 sum): the same bits.
//
// A Cast is removed once nothing else reads it.
// Runs after loss-scale (which makes UnscaleGradients) and before
// plan-memory; with --precision=fp32 there is nothing to fold.
#include "passes/fold_widening_casts.h"

#include "ir/mpc_ops.h"
#include "passes/pass.h"
#include "passes/precision_map.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mpc {
namespace {

/// The low-precision source of `v` when v is an exact widening Cast of it
/// to `to`, else nullptr.
Value *widenedSource(const Value *v, DType to) {
  const Node *cast = v ? v->producer() : nullptr;
  if (!cast || !cast->isOp("", "Cast") || v->dtype != to)
    return nullptr;
  Value *src = cast->input(0);
  return src && widensExactly(src->dtype, to) ? src : nullptr;
}

/// Replaces SumToShape node n by SumToShapeAs(h, X), keeping its names, and
/// says so in the precision map (mpc-opt --explain).
void foldIntoSumToShapeAs(Model &model, Graph &g, Node *n, Value *h) {
  std::string nodeName = n->name();
  Value *x = n->input(1);
  Value *out = n->output(0);
  Value *widened = n->input(0);
  Node *cast = widened->producer();
  std::string outName = out->name();
  Node *folded =
      g.createNode("SumToShapeAs", {h, x}, 1, nodeName, kMpcDomain, n);
  folded->output(0)->copyTypeFrom(*out);
  g.replaceAllUsesWith(out, folded->output(0));
  g.removeNode(n);
  g.renameValue(folded->output(0), outName);
  folded->setName(nodeName);
  if (PrecisionMap *m = precisionMapOf(model, g))
    m->record(*folded, {x->dtype, "fold-widening-casts",
                        "mpc.SumToShape reading its " +
                            std::string(dtypeName(h->dtype)) +
                            " dY as stored, summing in " + dtypeName(x->dtype) +
                            " (the Cast up folded in)"});
  if (widened->uses().empty() && !widened->isGraphOutput())
    g.removeNode(cast);
}

/// Points UnscaleGradients' gradient inputs that are exact fp16/bf16 -> fp32
/// Casts at the Casts' sources. Returns how many.
int64_t foldUnscaleInputs(Graph &g, Node *n) {
  int64_t folded = 0;
  for (size_t i = 1; i < n->numInputs(); ++i) {
    Value *widened = n->input(i);
    Value *h = widenedSource(widened, DType::F32);
    if (!h)
      continue;
    n->setInput(i, h);
    if (widened->uses().empty() && !widened->isGraphOutput())
      g.removeNode(widened->producer());
    ++folded;
  }
  return folded;
}

/// Points a layer-norm (or RMS-norm) gradient's dY (input 0) at the source
/// of the exact widening Cast to X's dtype it reads, if it reads one.
/// Returns whether it did.
bool foldNormGradInput(Graph &g, Node *n) {
  if (!(n->isOp(kMpcDomain, "LayerNormalizationGrad") ||
        n->isOp(kMpcDomain, "RMSNormalizationGrad")) ||
      n->numInputs() < 2 || !n->input(0) || !n->input(1))
    return false;
  Value *widened = n->input(0);
  Value *h = widenedSource(widened, n->input(1)->dtype);
  if (!h)
    return false;
  n->setInput(0, h);
  if (widened->uses().empty() && !widened->isGraphOutput())
    g.removeNode(widened->producer());
  return true;
}

/// The only reader of v, when v has exactly one and is no graph output.
Node *soleUser(const Value *v) {
  return v && v->uses().size() == 1 && !v->isGraphOutput()
             ? v->uses().front().user
             : nullptr;
}

/// Points an mpc.SGD or mpc.Adam node's gradient (input 3) at the source
/// of the exact fp16/bf16 -> fp32 Cast it reads, if it reads one. Returns
/// whether it did.
bool foldOptimizerGradient(Graph &g, Node *n) {
  if (!(n->isOp(kMpcDomain, "SGD") || n->isOp(kMpcDomain, "Adam")) ||
      n->numInputs() < 4)
    return false;
  Value *widened = n->input(3);
  Value *h = widenedSource(widened, DType::F32);
  if (!h)
    return false;
  if (soleUser(widened) == n) {
    // Replaced, then removed: mpc.grads, which names the fp32 gradient,
    // follows to the stored one (ir/metadata_value_refs.cpp).
    Node *cast = widened->producer();
    g.replaceAllUsesWith(widened, h);
    g.removeNode(cast);
  } else {
    n->setInput(3, h);
  }
  return true;
}

/// Records in the precision map (mpc-opt --explain) that `n` now runs
/// folded in dtype t, as `what` says. A user's override that placed the
/// node it came from (`prior`) stays its rule, the fold added to its detail.
void recordFold(Model &model, const Graph &g, const Node &n,
                const PrecisionRecord *prior, DType t,
                const std::string &what) {
  PrecisionMap *m = precisionMapOf(model, g);
  if (!m)
    return;
  if (prior && prior->rule.rfind("override:", 0) == 0)
    m->record(
        n, {t, prior->rule, prior->detail + "; fold-widening-casts: " + what});
  else
    m->record(n, {t, "fold-widening-casts", what});
}

/// Makes Softmax node n (reading the exact widening Cast `wide` of h) an
/// mpc.SoftmaxTo of h in place, or SoftmaxGrad node n (its dY that Cast) an
/// mpc.SoftmaxGradAs of (h, Y); the node keeps its name, axis and output.
void foldIntoSoftmax(Model &model, Graph &g, Node *n, Value *h) {
  bool grad = n->isOp(kMpcDomain, "SoftmaxGrad");
  Value *wide = n->input(0);
  DType to = n->output(0)->dtype;
  int64_t axis = n->attrInt("axis", -1);
  n->setOp(grad ? "SoftmaxGradAs" : "SoftmaxTo", kMpcDomain);
  std::vector<std::pair<std::string, Attribute>> attrs = {
      {"axis", Attribute::ofInt(axis)}};
  if (!grad)
    attrs.push_back({"to", Attribute::ofInt(toOnnxDataType(to))});
  n->setAttrs(std::move(attrs));
  n->setInput(0, h);
  std::optional<PrecisionRecord> prior = recordCopyOf(model, g, *n);
  recordFold(model, g, *n, prior ? &*prior : nullptr, to,
             std::string("the ") + dtypeName(to) +
                 (grad ? " mpc.SoftmaxGrad island reading its "
                       : " Softmax island reading its ") +
                 dtypeName(h->dtype) + (grad ? " dY" : " X") +
                 " as stored (the Cast up folded in)");
  if (wide->uses().empty() && !wide->isGraphOutput())
    g.removeNode(wide->producer());
}

/// The Cast source a Softmax (axis given: without it the default depends on
/// the opset) or SoftmaxGrad node reads as its widened input 0, else
/// nullptr.
Value *foldableSoftmaxSource(const Node *n) {
  bool grad = n->isOp(kMpcDomain, "SoftmaxGrad");
  if (!(grad || n->isOp("", "Softmax")) || !n->output(0) || !n->input(0) ||
      (!grad && !n->hasAttr("axis")) ||
      (grad && (n->numInputs() != 2 || !n->input(1) ||
                n->input(1)->dtype != n->output(0)->dtype)))
    return nullptr;
  return widenedSource(n->input(0), n->output(0)->dtype);
}

/// Whether D is one element of dtype t and rank at most `rank`, so that a
/// Div by it keeps the dividend's shape.
bool isScalarDivisor(const Value *d, DType t, size_t rank) {
  if (!d || d->dtype != t || !d->hasShape || d->dims.size() > rank)
    return false;
  for (const Dim &k : d->dims)
    if (!k.isKnown() || k.value != 1)
      return false;
  return true;
}

/// Div node n when it divides the softmax gradient SoftmaxGradAs(dY, Y) (or
/// a SoftmaxGrad whose dY has Y's dtype, the same op) by a scalar of Y's
/// dtype, the gradient read by nothing else: the attention's scaling
/// Div(scores, sqrt(d)) seen from the backward. Returns that gradient's
/// node, else nullptr.
Node *divisibleSoftmaxGrad(const Node *n) {
  if (!n->isOp("", "Div") || n->numInputs() != 2 || !n->output(0))
    return nullptr;
  Value *a = n->input(0);
  Node *sg = a ? a->producer() : nullptr;
  if (!sg || soleUser(a) != n || !sg->input(0) || !sg->input(1) ||
      !(sg->isOp(kMpcDomain, "SoftmaxGradAs") ||
        (sg->isOp(kMpcDomain, "SoftmaxGrad") &&
         sg->input(0)->dtype == sg->input(1)->dtype)))
    return nullptr;
  DType t = sg->input(1)->dtype;
  if (a->dtype != t || n->output(0)->dtype != t || !a->hasShape ||
      !isScalarDivisor(n->input(1), t, a->dims.size()))
    return nullptr;
  return sg;
}

/// Folds SoftmaxGrad(As) sg, the Div node div after it and, when it is the
/// Div's only reader, a Cast after that into one mpc.SoftmaxGradDiv at the
/// last node's place, which keeps that node's output (and the gradient
/// node's name). Returns whether a Cast was folded too.
bool foldIntoSoftmaxGradDiv(Model &model, Graph &g, Node *sg, Node *div) {
  Node *last = div;
  Node *cast = soleUser(div->output(0));
  if (cast && cast->isOp("", "Cast") && cast->input(0) == div->output(0) &&
      isFloating(cast->output(0)->dtype))
    last = cast;
  else
    cast = nullptr;
  Value *dy = sg->input(0), *y = sg->input(1), *d = div->input(1);
  int64_t axis = sg->attrInt("axis", -1);
  std::string name = sg->name();
  DType to = last->output(0)->dtype;
  last->setOp("SoftmaxGradDiv", kMpcDomain);
  last->setAttrs({{"axis", Attribute::ofInt(axis)},
                  {"to", Attribute::ofInt(toOnnxDataType(to))}});
  last->setInput(0, dy);
  if (last->numInputs() < 2)
    last->addInput(y);
  else
    last->setInput(1, y);
  if (last->numInputs() < 3)
    last->addInput(d);
  else
    last->setInput(2, d);
  std::optional<PrecisionRecord> prior = recordCopyOf(model, g, *sg);
  if (cast)
    g.removeNode(div);
  g.removeNode(sg);
  last->setName(name);
  recordFold(
      model, g, *last, prior ? &*prior : nullptr, to,
      std::string("the ") + dtypeName(y->dtype) + " mpc.SoftmaxGrad island" +
          (dy->dtype != y->dtype ? std::string(" reading its ") +
                                       dtypeName(dy->dtype) + " dY as stored,"
                                 : std::string()) +
          " divided by '" + d->name() + "' and written in " + dtypeName(to) +
          " (the Div" + (cast ? " and the Cast after it" : "") + " folded in)");
  return cast != nullptr;
}

/// The Div node a softmax island n (SoftmaxTo, or a Softmax with its axis
/// given) reads when it divides X by one element of X's dtype and nothing
/// else reads the quotient: the attention's scaling Div(scores, sqrt(d)).
Node *divisionIntoSoftmax(const Node *n) {
  if (!(n->isOp(kMpcDomain, "SoftmaxTo") ||
        (n->isOp("", "Softmax") && n->hasAttr("axis"))) ||
      !n->output(0))
    return nullptr;
  Value *q = n->input(0);
  Node *div = q ? q->producer() : nullptr;
  if (!div || !div->isOp("", "Div") || soleUser(q) != n ||
      div->numInputs() != 2 || !div->input(0))
    return nullptr;
  const Value *x = div->input(0);
  if (q->dtype != x->dtype || !x->hasShape ||
      !isScalarDivisor(div->input(1), x->dtype, x->dims.size()))
    return nullptr;
  return div;
}

/// Makes softmax island n an mpc.DivSoftmaxTo of the Div node div's
/// operands in place (keeping its name, axis, `to` and output).
void foldIntoDivSoftmaxTo(Model &model, Graph &g, Node *n, Node *div) {
  Value *x = div->input(0), *d = div->input(1);
  DType to = n->output(0)->dtype;
  int64_t axis = n->attrInt("axis", -1);
  std::optional<PrecisionRecord> prior = recordCopyOf(model, g, *n);
  n->setOp("DivSoftmaxTo", kMpcDomain);
  n->setAttrs({{"axis", Attribute::ofInt(axis)},
               {"to", Attribute::ofInt(toOnnxDataType(to))}});
  n->setInput(0, x);
  n->addInput(d);
  g.removeNode(div);
  recordFold(model, g, *n, prior ? &*prior : nullptr, to,
             std::string("the ") + dtypeName(to) + " Softmax island" +
                 (x->dtype != to ? std::string(" reading its ") +
                                       dtypeName(x->dtype) + " X as stored,"
                                 : std::string()) +
                 " divided by '" + d->name() + "' in " + dtypeName(x->dtype) +
                 " (the Div" + (x->dtype != to ? " and the Cast up" : "") +
                 " folded in)");
}

/// Points the readers of every Cast of v to v's own dtype (an identity
/// Cast: a model's `.to(dtype)` after autocast made both sides one type) at
/// v itself, and removes those Casts: the Cast down behind them is then
/// v's own reader. Same bits.
void bypassIdentityCasts(Graph &g, Value *v) {
  // A chain of them (`.float().to(dtype)`): each bypassed one's readers
  // become v's, so look again until none is left.
  for (bool again = true; again;) {
    again = false;
    for (const Use &u : std::vector<Use>(v->uses())) {
      Node *c = u.user;
      if (c->isOp("", "Cast") && c->output(0) &&
          !c->output(0)->isGraphOutput() && c->output(0)->dtype == v->dtype) {
        g.replaceAllUsesWith(c->output(0), v);
        g.removeNode(c);
        again = true;
        break;
      }
    }
  }
}

bool isSoftmaxIsland(const Node *n) {
  return n->isOp(kMpcDomain, "SoftmaxTo") ||
         n->isOp(kMpcDomain, "DivSoftmaxTo");
}

/// A reader of fp32 y that casts it down to fp16/bf16 (to `only`'s type
/// when that is given) for the next matrix product, else nullptr.
Node *castDownReader(const Value *y, const Value *only) {
  if (!y || y->dtype != DType::F32)
    return nullptr;
  for (const Use &u : y->uses()) {
    Node *c = u.user;
    if (c->isOp("", "Cast") && c->output(0) && !c->output(0)->isGraphOutput() &&
        (c->output(0)->dtype == DType::F16 ||
         c->output(0)->dtype == DType::BF16) &&
        (!only || only->dtype == c->output(0)->dtype))
      return c;
  }
  return nullptr;
}

/// The Cast down of softmax island n's output Y that the next matrix
/// product reads (Cast<to = fp16/bf16>(Y) of an fp32 Y), when n writes no
/// Ylow yet or writes it in the Cast's type; else nullptr.
Node *narrowingCastOfSoftmax(const Node *n) {
  if (!isSoftmaxIsland(n) || n->numOutputs() < 1 || n->numOutputs() > 2)
    return nullptr;
  return castDownReader(n->output(0),
                        n->numOutputs() == 2 ? n->output(1) : nullptr);
}

/// Makes node n, which writes Y at output 0 and may write its Cast down at
/// output 1 (an island's Ylow, an add's Clow), write the Cast node's output
/// itself: as that output beside Y when Y has other readers, or, when the
/// Cast is Y's only reader, as Y (`to` the Cast's type: the kernels compute
/// in fp32 and round once, the Cast's bits). Says so in the precision map.
void writeCastDown(Model &model, Graph &g, Node *n, Node *cast) {
  Value *y = n->output(0), *low = cast->output(0);
  const DType lowT = low->dtype;
  const std::string name = low->name();
  if (soleUser(y) == cast) {
    n->setAttr("to", Attribute::ofInt(toOnnxDataType(lowT)));
    g.replaceAllUsesWith(low, y);
    g.removeNode(cast);
    y->copyTypeFrom(*low);
    g.renameValue(y, name);
  } else {
    Value *out = n->addOutput(name + "_low");
    out->copyTypeFrom(*low);
    g.replaceAllUsesWith(low, out);
    g.removeNode(cast);
    g.renameValue(out, name);
    n->setAttr("low", Attribute::ofInt(toOnnxDataType(lowT)));
  }
  if (std::optional<PrecisionRecord> r = recordCopyOf(model, g, *n)) {
    r->detail += std::string("; it writes the ") + dtypeName(lowT) +
                 " copy the next product reads too (the Cast down folded in)";
    precisionMapOf(model, g)->record(*n, *r);
  }
}

/// Makes softmax island n write the Cast node's output itself
/// (writeCastDown: its Ylow, or Y for a Cast that is Y's only reader). An
/// island that writes its Ylow already serves the Cast's readers from it.
void foldCastIntoSoftmax(Model &model, Graph &g, Node *n, Node *cast) {
  if (n->numOutputs() == 2 && n->output(1)) {
    g.replaceAllUsesWith(cast->output(0), n->output(1));
    g.removeNode(cast);
    return;
  }
  writeCastDown(model, g, n, cast);
}

/// Whether n is a norm fold-widening-casts can make write its Cast down:
/// an ONNX LayerNormalization with its bias and fp32 statistics, or an
/// mpc.RMSNormalization.
bool isFoldableNorm(const Node *n) {
  if (n->isOp(kMpcDomain, "RMSNormalization"))
    return n->numInputs() == 2 && n->numOutputs() == 1;
  return n->isOp("", "LayerNormalization") && n->numInputs() == 3 &&
         n->input(2) && n->attrInt("stash_type", 1) == 1;
}

/// The Cast down of norm n's fp32 Y for the next matrix product
/// (Cast<to = fp16/bf16>(Y)), when n is a foldable norm; else nullptr.
Node *narrowingCastOfNorm(const Node *n) {
  return isFoldableNorm(n) ? castDownReader(n->output(0), nullptr) : nullptr;
}

/// Replaces norm n and its Cast down by one mpc.LayerNormalizationTo (or
/// RMSNormalizationTo) writing the Cast's output: as its Ylow beside the
/// fp32 Y when Y has other readers (a post-LN block's residual), or as Y
/// itself (`to` the Cast's type) when the Cast was Y's only reader (a
/// pre-LN block). Every value keeps its name; other Casts of Y to the same
/// type read the Ylow.
void foldCastIntoNorm(Model &model, Graph &g, Node *n, Node *cast) {
  const bool rms = n->isOp(kMpcDomain, "RMSNormalization");
  Value *y = n->output(0), *low = cast->output(0);
  const DType lowT = low->dtype;
  std::optional<PrecisionRecord> record = recordCopyOf(model, g, *n);
  const bool alone = soleUser(y) == cast;
  // Y (or the Cast's output), [Mean, InvStdDev,] [Ylow], under fresh names
  // first: the old values are renamed onto once they are gone.
  std::vector<Value *> olds = {alone ? low : y};
  if (!rms) {
    olds.push_back(n->output(1));
    olds.push_back(n->output(2));
  }
  if (!alone)
    olds.push_back(low);
  std::vector<std::string> names;
  for (Value *v : olds)
    names.push_back(v ? g.uniqueValueName(v->name() + "_folded")
                      : std::string());
  const char *op = rms ? "RMSNormalizationTo" : "LayerNormalizationTo";
  Node *f = g.createNodeWithOutputs(op, n->inputs(), names, n->name() + "_to",
                                    kMpcDomain, n);
  for (const char *a : {"axis", "epsilon"})
    if (const Attribute *at = n->attr(a))
      f->setAttr(a, *at);
  f->setAttr("to", Attribute::ofInt(toOnnxDataType(alone ? lowT : DType::F32)));
  if (!alone)
    f->setAttr("low", Attribute::ofInt(toOnnxDataType(lowT)));
  // Other Casts of Y to the Cast's type become readers of the one copy.
  if (!alone)
    for (const Use &u : std::vector<Use>(y->uses()))
      if (u.user != cast && u.user->isOp("", "Cast") && u.user->output(0) &&
          !u.user->output(0)->isGraphOutput() &&
          u.user->output(0)->dtype == lowT) {
        Node *twin = u.user;
        g.replaceAllUsesWith(twin->output(0), low);
        g.removeNode(twin);
      }
  std::vector<std::string> oldNames;
  for (size_t i = 0; i < olds.size(); ++i) {
    oldNames.push_back(olds[i] ? olds[i]->name() : std::string());
    if (olds[i]) {
      f->output(i)->copyTypeFrom(*olds[i]);
      g.replaceAllUsesWith(olds[i], f->output(i));
    }
  }
  std::string nodeName = n->name();
  g.removeNode(cast);
  g.removeNode(n);
  for (size_t i = 0; i < olds.size(); ++i)
    if (olds[i])
      g.renameValue(f->output(i), oldNames[i]);
  f->setName(nodeName);
  if (record) {
    record->detail += std::string("; it writes the ") + dtypeName(lowT) +
                      " copy the next product reads too (the Cast down "
                      "folded in: mpc." +
                      op + ")";
    precisionMapOf(model, g)->record(*f, *record);
  }
}

/// Whether n is an fp32 Add of two same-shape operands (no broadcasting),
/// the adds mpc.AddTo computes; `a` and `b` get its operands, each read
/// through an exact Cast up to its fp16/bf16 source where it is one.
bool addToOperands(const Node *n, Value *&a, Value *&b) {
  if (!n->isOp("", "Add") || n->numInputs() != 2 || n->numOutputs() != 1 ||
      !n->input(0) || !n->input(1) || !n->output(0) ||
      n->output(0)->dtype != DType::F32)
    return false;
  Value *wa = widenedSource(n->input(0), DType::F32);
  Value *wb = widenedSource(n->input(1), DType::F32);
  a = wa ? wa : n->input(0);
  b = wb ? wb : n->input(1);
  auto addable = [](DType t) {
    return t == DType::F32 || t == DType::F16 || t == DType::BF16;
  };
  const Value *y = n->output(0);
  return a->hasShape && b->hasShape && y->hasShape && a->dims == b->dims &&
         a->dims == y->dims && addable(a->dtype) && addable(b->dtype);
}

/// Replaces n by mpc.AddTo(a, b) <to = fp32> writing n's output, under its
/// names; removes Casts up that no longer have readers. `detail`: the
/// precision map's (mpc-opt --explain).
Node *replaceByAddTo(Model &model, Graph &g, Node *n, Value *a, Value *b,
                     const std::string &detail) {
  std::string nodeName = n->name(), outName = n->output(0)->name();
  std::vector<Value *> widened = {n->input(0), n->input(1)};
  Node *add = g.createNode("AddTo", {a, b}, 1, nodeName, kMpcDomain, n);
  add->setAttr("to", Attribute::ofInt(toOnnxDataType(DType::F32)));
  add->output(0)->copyTypeFrom(*n->output(0));
  g.replaceAllUsesWith(n->output(0), add->output(0));
  g.removeNode(n);
  g.renameValue(add->output(0), outName);
  add->setName(nodeName);
  for (Value *w : widened)
    if (w != a && w != b && w->uses().empty() && !w->isGraphOutput() &&
        w->producer())
      g.removeNode(w->producer());
  if (PrecisionMap *m = precisionMapOf(model, g))
    m->record(*add, {DType::F32, "fold-widening-casts", detail});
  return add;
}

/// The residual stream's adds and the gradient sums: an fp32 Add of an
/// exact Cast up of a 16-bit operand reads the operand as stored, and an
/// fp32 Add whose sum is cast down for the next product writes that copy
/// itself (mpc.AddTo, same bits). Returns the Casts folded.
int64_t foldAdds(Model &model, Graph &g) {
  int64_t folded = 0;
  std::vector<Node *> adds;
  for (Node *n : g.nodeList()) {
    Value *a = nullptr, *b = nullptr;
    if (!addToOperands(n, a, b))
      continue;
    if (a != n->input(0) || b != n->input(1)) {
      folded += (a != n->input(0) ? 1 : 0) + (b != n->input(1) ? 1 : 0);
      adds.push_back(replaceByAddTo(
          model, g, n, a, b,
          "an fp32 Add reading its 16-bit operand as stored (the Cast up "
          "folded in: mpc.AddTo)"));
    } else if (castDownReader(n->output(0), nullptr)) {
      adds.push_back(n);
    }
  }
  for (Node *n : adds) {
    bypassIdentityCasts(g, n->output(0));
    Node *cast = castDownReader(n->output(0), nullptr);
    if (!cast)
      continue;
    if (n->isOp("", "Add"))
      n = replaceByAddTo(model, g, n, n->input(0), n->input(1),
                         "an fp32 Add (mpc.AddTo)");
    writeCastDown(model, g, n, cast); // Clow, or C in the Cast's type
    ++folded;
  }
  return folded;
}

int64_t foldGraph(Model &model, Graph &g, int64_t &gradients, int64_t &updates,
                  int64_t &normGrads, int64_t &softmaxes, int64_t &divisions,
                  int64_t &narrowings, int64_t &layerNorms, int64_t &adds) {
  int64_t folded = 0;
  for (Node *n : g.nodeList()) {
    if (n->isOp(kMpcDomain, "UnscaleGradients")) {
      gradients += foldUnscaleInputs(g, n);
      continue;
    }
    if (foldOptimizerGradient(g, n)) {
      ++updates;
      continue;
    }
    if (foldNormGradInput(g, n)) {
      ++normGrads;
      continue;
    }
    if (Value *h = foldableSoftmaxSource(n)) {
      foldIntoSoftmax(model, g, n, h);
      ++softmaxes;
      continue;
    }
    if (!n->isOp(kMpcDomain, "SumToShape") || n->numInputs() != 2 ||
        !n->input(0) || !n->input(1) || !n->output(0))
      continue;
    Value *x = n->input(1);
    if (n->output(0)->dtype != x->dtype)
      continue;
    if (Value *h = widenedSource(n->input(0), x->dtype)) {
      foldIntoSumToShapeAs(model, g, n, h);
      ++folded;
    }
  }
  // After the Casts up are folded: the scaling Div into the softmax, and
  // the gradient's Div (and Cast down) into the softmax gradient; then the
  // softmax's Cast down for the next product into the softmax.
  for (Node *n : g.nodeList()) {
    if (Node *div = divisionIntoSoftmax(n)) {
      foldIntoDivSoftmaxTo(model, g, n, div);
      ++divisions;
    } else if (Node *sg = divisibleSoftmaxGrad(n)) {
      foldIntoSoftmaxGradDiv(model, g, sg, n);
      ++divisions;
    }
  }
  std::vector<Node *> islands;
  for (Node *n : g.nodeList())
    if (isSoftmaxIsland(n))
      islands.push_back(n);
  narrowings += foldCastsDownIntoSoftmaxes(model, g, islands);
  // Norms' Casts down (layer and RMS norms), found first (a fold removes
  // nodes).
  std::vector<std::pair<Node *, Node *>> norms;
  std::vector<Node *> normNodes;
  for (Node *n : g.nodeList())
    if (isFoldableNorm(n) && n->output(0))
      normNodes.push_back(n);
  for (Node *n : normNodes) {
    bypassIdentityCasts(g, n->output(0));
    if (Node *cast = narrowingCastOfNorm(n))
      norms.emplace_back(n, cast);
  }
  for (auto [n, cast] : norms)
    foldCastIntoNorm(model, g, n, cast);
  layerNorms += int64_t(norms.size());
  adds += foldAdds(model, g);
  return folded;
}

} // namespace

int64_t foldCastsDownIntoSoftmaxes(Model &model, Graph &g,
                                   const std::vector<Node *> &islands) {
  // Only Casts are removed, never an island, so the list stays valid. An
  // island's Y may have several Casts down (one Ylow serves each of its
  // type).
  int64_t folded = 0;
  for (Node *n : islands) {
    if (isSoftmaxIsland(n) && n->output(0))
      bypassIdentityCasts(g, n->output(0));
    while (Node *cast = narrowingCastOfSoftmax(n)) {
      foldCastIntoSoftmax(model, g, n, cast);
      ++folded;
    }
  }
  return folded;
}

void runFoldWideningCasts(Model &model, PassContext &ctx) {
  int64_t gradients = 0, updates = 0, normGrads = 0, softmaxes = 0,
          divisions = 0, narrowings = 0, layerNorms = 0, adds = 0;
  ctx.stats["sums-folded"] +=
      foldGraph(model, workingGraph(model), gradients, updates, normGrads,
                softmaxes, divisions, narrowings, layerNorms, adds);
  ctx.stats["add-casts-folded"] += adds;
  ctx.stats["norm-casts-down-folded"] += layerNorms;
  ctx.stats["norm-gradient-inputs-folded"] += normGrads;
  ctx.stats["optimizer-gradients-folded"] += updates;
  ctx.stats["softmax-casts-down-folded"] += narrowings;
  ctx.stats["softmax-divs-folded"] += divisions;
  ctx.stats["unscale-inputs-folded"] += gradients;
  ctx.stats["softmaxes-folded"] += softmaxes;
}

} // namespace mpc
