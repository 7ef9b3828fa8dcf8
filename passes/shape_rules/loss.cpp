// Shape rules of the losses: SoftmaxCrossEntropyLoss and
// NegativeLogLikelihoodLoss (reduction mean/sum/none, optional class
// weights) and their mpc backward ops.
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"

namespace mpc::shape_rules {

namespace {

TypeInfo maybeShaped(DType t, const std::optional<Dims> &d) {
  return d ? shaped(t, *d) : unranked(t);
}

/// The losses' `reduction` attribute: "mean" (the default), "sum" or "none".
std::string lossReduction(Ctx &c) {
  std::string reduction = c.stringAttr("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    fail([&] {
      errorAt(c.n) << "attribute 'reduction' must be \"mean\", \"sum\" or "
                      "\"none\", got \""
                   << reduction << "\"";
    });
  return reduction;
}

/// Checks the [N, C, d1...] scores / [N, d1...] labels / [C] weights of the
/// loss ops and returns the per-element loss shape [N, d1...].
std::optional<Dims> lossShape(Ctx &c) {
  Value *scores = c.req(0);
  Value *labels = c.req(1);
  c.requireFloat(0);
  c.requireIndex(1, "labels");
  c.sameDType({0, 2});
  std::string reduction = lossReduction(c);
  c.intAttr("ignore_index", 0);
  if (scores->hasShape && scores->rank() < 2)
    fail([&] {
      errorAt(c.n) << "scores (" << c.inputText(0)
                   << ") must have rank >= 2 ([N, C, ...]), got "
                   << typeText(scores);
    });
  if (const Value *w = c.opt(2)) {
    c.requireRank(2, 1);
    if (w->hasShape && scores->hasShape &&
        dimsConflict(w->dims[0], scores->dims[1]))
      fail([&] {
        errorAt(c.n) << "weights " << typeText(w) << " must have one entry per "
                     << "class (" << scores->dims[1].value << ")";
      });
  }
  std::optional<Dims> out;
  if (scores->hasShape) {
    Dims d = scores->dims;
    d.erase(d.begin() + 1);
    out = d;
  }
  if (labels->hasShape) {
    if (out && labels->dims.size() != out->size())
      fail([&] {
        errorAt(c.n) << "labels " << typeText(labels)
                     << " must have the shape of scores " << typeText(scores)
                     << " without the class dim (" << dimsToString(*out) << ")";
      });
    if (!out)
      out = labels->dims;
    for (size_t i = 0; i < out->size(); ++i) {
      if (dimsConflict((*out)[i], labels->dims[i]))
        fail([&] {
          errorAt(c.n) << "labels " << typeText(labels)
                       << " must have the shape of scores " << typeText(scores)
                       << " without the class dim (" << dimsToString(*out)
                       << ")";
        });
      (*out)[i] = unifyDim((*out)[i], labels->dims[i]);
    }
  }
  return out;
}

void inferSoftmaxCrossEntropyLoss(Ctx &c) {
  auto perElement = lossShape(c);
  const Value *scores = c.n.input(0);
  bool none = c.stringAttr("reduction", "mean") == "none";
  c.set(0, none ? maybeShaped(scores->dtype, perElement)
                : shaped(scores->dtype, {}));
  c.setLike(1, scores);
}

void inferNegativeLogLikelihoodLoss(Ctx &c) {
  auto perElement = lossShape(c);
  const Value *x = c.n.input(0);
  bool none = c.stringAttr("reduction", "mean") == "none";
  c.set(0, none ? maybeShaped(x->dtype, perElement) : shaped(x->dtype, {}));
}

/// The loss gradients: dScores/dX typed and shaped like input 1.
void inferLossGrad(Ctx &c) {
  c.req(0);
  Value *x = c.req(1);
  c.req(2);
  c.requireFloat(0);
  c.requireFloat(1);
  c.requireIndex(2, "labels");
  std::string reduction = lossReduction(c);
  const Value *dl = c.n.input(0);
  if (reduction != "none" && dl->hasShape && dl->rank() != 0)
    fail([&] {
      errorAt(c.n) << "dL (" << c.inputText(0) << ") must be a scalar for "
                   << "reduction \"" << reduction << "\", got " << typeText(dl);
    });
  if (x->hasShape && x->rank() < 2)
    fail([&] {
      errorAt(c.n) << c.inputText(1)
                   << " must have rank >= 2 ([N, C, ...]), got " << typeText(x);
    });
  c.setLike(0, x);
}

const OpRule kRules[] = {
    {"", "SoftmaxCrossEntropyLoss", 2, 3, 1, 2, inferSoftmaxCrossEntropyLoss},
    {"", "NegativeLogLikelihoodLoss", 2, 3, 1, 1,
     inferNegativeLogLikelihoodLoss},
    {kMpcDomain, "SoftmaxCrossEntropyLossGrad", 3, 4, 1, 1, inferLossGrad},
    {kMpcDomain, "NegativeLogLikelihoodLossGrad", 3, 4, 1, 1, inferLossGrad},
};

} // namespace

RuleRows lossRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
