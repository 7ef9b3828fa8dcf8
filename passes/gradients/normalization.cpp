// Gradient rules of the normalisations: LayerNormalization,
// mpc.RMSNormalization and BatchNormalization.
//
// Layer norm (and RMS norm) is differentiated from forward outputs it does
// not always produce (the saved mean / inverse standard deviation), so
// autodiff first gives the forward node those outputs
// (prepareLayerNormalizationForward): the backward then reuses the forward's
// statistics exactly instead of recomputing them. The backward ops of domain
// "mpc" are specified in ir/mpc_ops.h.
//
// BatchNormalization: one mpc.BatchNormalizationGrad node with up to three
// outputs (dX, dScale, dBias; the unwanted ones omitted).
//
// In training mode the backward recomputes the batch statistics from X
// (ir/mpc_ops.h), so the forward node stays the standard ONNX op with
// its standard outputs; in inference mode it reads the mean and var inputs,
// which are constants of the step. The running mean and var are never
// differentiated (registry.cpp lists inputs 3 and 4 as non-differentiable;
// autodiff binds the running-statistics outputs as state updates instead).
#include "passes/gradients/gradient_rules.h"

#include "ir/batch_norm_mode.h"
#include "ir/mpc_ops.h"
#include "passes/gradients/rule_support.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <unordered_set>

namespace mpc {
namespace {

/// One output of a multi-output backward node; `present` false leaves the
/// slot empty (the op then does not compute it).
struct OutputSpec {
  bool present = false;
  DType dtype = DType::Undefined;
  Dims dims;
  std::string nameHint;
};

/// A multi-output backward node named like GradientContext's single-output
/// ones ("<fwdnode>_grad"), its outputs typed and then refined by shape
/// inference. Returns the outputs (nullptr for the empty slots).
std::vector<Value *> emitMulti(GradientContext &ctx, const std::string &opType,
                               const std::vector<Value *> &inputs,
                               GradientContext::Attrs attrs,
                               const std::vector<OutputSpec> &outputs,
                               const std::string &domain) {
  Graph &g = ctx.graph();
  std::vector<std::string> names;
  names.reserve(outputs.size());
  for (const OutputSpec &o : outputs)
    names.push_back(o.present
                        ? g.uniqueValueName(sanitizeIdentifier(o.nameHint))
                        : std::string());
  // The names and the attribute list move into the new node.
  Node *n = g.createNodeWithOutputs(
      opType, inputs, std::move(names),
      g.uniqueNodeName(nodeHint(ctx.node()) + "_grad"), domain);
  n->setAttrs(std::move(attrs));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (Value *v = n->output(i))
      v->setType(outputs[i].dtype, outputs[i].dims);
  inferNode(*n, ctx.opset());
  return n->outputs();
}

/// LayerNormalization's and mpc.RMSNormalization's rule: one `gradOp` node
/// reading `ins` (dY, X, scale, ...) with the forward's axis and `attrs`,
/// giving dX and the gradients of the normalised-shape parameters (inputs
/// 1 .. params), each summed back to its input's shape.
void normalizationGrad(GradientContext &ctx, const char *gradOp,
                       const std::vector<Value *> &ins,
                       GradientContext::Attrs attrs, size_t params) {
  Value *x = ctx.in(0), *dY = ctx.outGrad(0);
  int64_t axis = normalizedAxis(ctx, *x, -1);
  attrs.insert(attrs.begin(), {"axis", Attribute::ofInt(axis)});
  Dims norm(x->dims.begin() + axis, x->dims.end());
  std::vector<OutputSpec> outs = {
      {ctx.wants(0), dY->dtype, x->dims, ctx.gradName(0)}};
  const char *full[] = {"", "scale_full", "bias_full"};
  for (size_t i = 1; i <= params; ++i) {
    Value *p = ctx.in(i);
    outs.push_back(
        {ctx.wants(i), dY->dtype, norm,
         p && p->dims == norm ? ctx.gradName(i) : ctx.tempName(full[i])});
  }
  // Trailing outputs nobody needs are dropped, not left as empty slots.
  while (!outs.back().present)
    outs.pop_back();
  std::vector<Value *> grads =
      emitMulti(ctx, gradOp, ins, attrs, outs, kMpcDomain);
  if (ctx.wants(0))
    ctx.setInputGrad(0, grads[0]);
  for (size_t i = 1; i <= params; ++i)
    if (ctx.wants(i))
      ctx.setInputGrad(i, ctx.sumToInputShape(grads[i], i));
}

} // namespace

Node *prepareLayerNormalizationForward(Graph &graph, Node *node,
                                       int64_t opset) {
  return withOutputs(graph, node, opset, 3, {"", "mean", "inv_std"});
}

void gradLayerNormalization(GradientContext &ctx) {
  Node &n = ctx.node();
  if (ctx.outGrad(1) || ctx.outGrad(2))
    errorAt(n) << "the loss depends on the Mean/InvStdDev outputs; mpc "
                  "differentiates LayerNormalization through Y only";
  Value *mean = ctx.out(1), *inv = ctx.out(2);
  if (!mean || !inv)
    errorAt(n) << "internal: the Mean/InvStdDev outputs were not added "
                  "before differentiating";
  normalizationGrad(ctx, "LayerNormalizationGrad",
                    {ctx.outGrad(0), ctx.in(0), ctx.in(1), mean, inv}, {}, 2);
}

void gradRMSNormalization(GradientContext &ctx) {
  // The backward recomputes inv_std from X (mpc_ops.h) with the forward's
  // epsilon.
  normalizationGrad(
      ctx, "RMSNormalizationGrad", {ctx.outGrad(0), ctx.in(0), ctx.in(1)},
      {{"epsilon", Attribute::ofFloat(ctx.node().attrFloat("epsilon", 1e-5f))}},
      1);
}

void gradBatchNormalization(GradientContext &ctx) {
  Node &n = ctx.node();
  for (size_t i = 1; i < n.numOutputs(); ++i)
    if (ctx.outGrad(i))
      errorAt(n) << "output " << i << " ('" << n.output(i)->name()
                 << "', running statistics) reaches the loss; only Y is "
                    "differentiated";
  Value *x = ctx.in(0), *scale = ctx.in(1), *dY = ctx.outGrad(0);
  std::vector<Value *> inputs = {dY, x, scale};
  if (!isBatchNormTraining(n)) {
    inputs.push_back(ctx.in(3));
    inputs.push_back(ctx.in(4));
  }
  Graph &g = ctx.graph();
  // One name per wanted gradient; the same value feeding two inputs (scale
  // as B) would otherwise ask for one name twice.
  std::vector<std::string> names;
  for (size_t i = 0; i < 3; ++i) {
    std::string name;
    if (ctx.wants(i)) {
      std::string hint = ctx.gradName(i);
      name = g.uniqueValueName(hint);
      for (int k = 1;
           std::find(names.begin(), names.end(), name) != names.end(); ++k)
        name = g.uniqueValueName(hint + "_" + std::to_string(k));
    }
    names.push_back(name);
  }
  std::string hint = n.name().empty() ? n.opType() : n.name();
  Node *grad =
      g.createNodeWithOutputs("BatchNormalizationGrad", inputs, names,
                              g.uniqueNodeName(hint + "_grad"), kMpcDomain);
  grad->setAttr("epsilon", Attribute::ofFloat(n.attrFloat("epsilon", 1e-5f)));
  if (Value *dx = grad->output(0))
    dx->setType(dY->dtype, x->dims);
  for (size_t i = 1; i < 3; ++i)
    if (Value *d = grad->output(i))
      d->copyTypeFrom(*ctx.in(i));
  inferNode(*grad, ctx.opset());
  for (size_t i = 0; i < 3; ++i)
    if (ctx.wants(i))
      ctx.setInputGrad(i, grad->output(i));
}

std::unordered_set<const Value *> batchNormRunningStats(const Graph &g) {
  std::unordered_set<const Value *> stats;
  for (const auto &n : g.nodes())
    if (n->isOp("", "BatchNormalization"))
      for (size_t i = 3; i < 5; ++i)
        if (const Value *v = n->input(i); v && v->isInitializer())
          stats.insert(v);
  return stats;
}

std::vector<std::pair<Value *, Value *>> batchNormStateUpdates(const Graph &g) {
  std::vector<std::pair<Value *, Value *>> updates;
  // Walks the list itself (read only): a copy of it (nodeList) cost more
  // than the check, which finds no BatchNormalization in most models.
  for (const auto &owned : g.nodes()) {
    Node *n = owned.get();
    if (!n->isOp("", "BatchNormalization") || !isBatchNormTraining(*n))
      continue;
    // Input 3 (running mean) becomes output 1, input 4 (var) output 2.
    for (size_t i = 3; i < 5; ++i) {
      Value *state = n->input(i), *fresh = n->output(i - 2);
      if (!state || !fresh || !state->isInitializer() || !state->isState)
        continue;
      bool seen = false;
      for (const auto &u : updates)
        seen |= u.first == state;
      if (seen)
        errorAt(*n) << "running statistic '" << state->name()
                    << "' is updated by two BatchNormalization nodes";
      updates.emplace_back(state, fresh);
    }
  }
  return updates;
}

} // namespace mpc
