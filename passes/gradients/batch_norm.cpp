// Gradient rule of BatchNormalization: one mpc.BatchNormalizationGrad node
// with up to three outputs (dX, dScale, dBias; the unwanted ones omitted).
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
#include "passes/shape_inference.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <unordered_set>

namespace mpc {

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
