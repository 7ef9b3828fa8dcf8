// Gradient rules of the loss ops: SoftmaxCrossEntropyLoss and
// NegativeLogLikelihoodLoss, with their reduction, ignore_index and optional
// class weights.
//
// SoftmaxCrossEntropyLoss is differentiated from its own log_prob output
// (exp(log_prob) is the softmax), so autodiff first makes the forward node
// produce that optional output (prepareSoftmaxCrossEntropyLossForward). Class
// weights are not differentiated: they are constants of the loss, as in
// PyTorch.
#include "passes/gradients/gradient_rules.h"

#include "passes/shape_inference.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

/// reduction and (when given) ignore_index, copied from the forward node.
GradientContext::Attrs lossAttrs(const Node &n) {
  GradientContext::Attrs attrs = {
      {"reduction", Attribute::ofString(n.attrString("reduction", "mean"))}};
  if (const Attribute *a = n.attr("ignore_index"))
    attrs.push_back({"ignore_index", *a});
  return attrs;
}

/// Inputs of the backward loss op: (dL, first, labels [, weights]).
std::vector<Value *> lossGradInputs(GradientContext &ctx, Value *dL,
                                    Value *first) {
  std::vector<Value *> ins = {dL, first, ctx.in(1)};
  if (ctx.in(2))
    ins.push_back(ctx.in(2));
  return ins;
}

} // namespace

Node *prepareSoftmaxCrossEntropyLossForward(Graph &graph, Node *node,
                                            int64_t opset) {
  if (node->numOutputs() >= 2 && node->output(1))
    return node;
  Value *scores = node->input(0);
  std::string logProbName = graph.uniqueValueName(
      sanitizeIdentifier(node->name().empty() ? "sce" : node->name()) +
      "_log_prob");
  if (node->numOutputs() == 1) {
    Value *lp = node->addOutput(logProbName);
    lp->copyTypeFrom(*scores);
    inferNode(*node, opset);
    return node;
  }
  // The output slot exists but is omitted (""): outputs cannot be added in
  // the middle, so replace the node by one that has both outputs.
  Value *oldLoss = node->output(0);
  std::string lossName = oldLoss->name();
  std::string nodeName = node->name();
  node->setName(nodeName + "_replaced");
  Node *fresh = graph.createNodeWithOutputs(
      node->opType(), node->inputs(),
      {graph.uniqueValueName(lossName + "_new"), logProbName}, nodeName,
      node->domain(), node);
  for (const auto &kv : node->attributes())
    fresh->setAttr(kv.first, kv.second);
  fresh->output(0)->copyTypeFrom(*oldLoss);
  fresh->output(1)->copyTypeFrom(*scores);
  inferNode(*fresh, opset);
  graph.replaceAllUsesWith(oldLoss, fresh->output(0));
  graph.removeNode(node);
  graph.renameValue(fresh->output(0), lossName);
  return fresh;
}

void gradSoftmaxCrossEntropyLoss(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *scores = ctx.in(0);
  Value *logProb = ctx.out(1);
  if (!logProb)
    errorAt(n) << "internal: the log_prob output was not added before "
                  "differentiating";
  Value *dL = ctx.outGrad(0);
  Value *dLogProb = ctx.outGrad(1);
  bool both = dL && dLogProb;
  Value *fromLoss = nullptr, *fromLogProb = nullptr;
  if (dL) {
    fromLoss =
        ctx.emitMpc("SoftmaxCrossEntropyLossGrad",
                    lossGradInputs(ctx, dL, logProb), lossAttrs(n), *scores,
                    both ? ctx.tempName("from_loss") : ctx.gradName(0));
  }
  if (dLogProb) {
    // log_prob is also used downstream: its gradient flows back through the
    // log-softmax over the class axis.
    fromLogProb = ctx.emitMpc(
        "LogSoftmaxGrad", {dLogProb, logProb}, {{"axis", Attribute::ofInt(1)}},
        *scores, both ? ctx.tempName("from_log_prob") : ctx.gradName(0));
  }
  ctx.setInputGrad(
      0, both ? ctx.binary("Add", fromLoss, fromLogProb, ctx.gradName(0))
              : (fromLoss ? fromLoss : fromLogProb));
}

void gradNegativeLogLikelihoodLoss(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *x = ctx.in(0);
  ctx.setInputGrad(0, ctx.emitMpc("NegativeLogLikelihoodLossGrad",
                                  lossGradInputs(ctx, ctx.outGrad(0), x),
                                  lossAttrs(n), *x, ctx.gradName(0)));
}

} // namespace mpc
