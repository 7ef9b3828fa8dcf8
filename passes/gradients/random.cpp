// Gradient rule of Dropout; the random draws (RandomUniformLike,
// RandomNormalLike, Bernoulli) pass no gradient and have no rule
// (registry.cpp lists them without one).
//
// A Dropout that may train is differentiated from its mask output, which it
// does not always produce, so autodiff first gives the forward node that
// output (prepareDropoutForward): the backward then reuses the forward's mask
// exactly instead of drawing it again.
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "passes/gradients/rule_support.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

/// Whether a Dropout node can run in training mode: its training_mode input
/// (opset 12+) is present and not the constant false.
bool dropoutMayTrain(const Node &n, int64_t opset) {
  if (opset < 12 || !n.input(2))
    return false;
  auto v = constantInt64s(n.input(2));
  return !v || v->empty() || (*v)[0] != 0;
}

} // namespace

Node *prepareDropoutForward(Graph &graph, Node *node, int64_t opset) {
  return dropoutMayTrain(*node, opset)
             ? withOutputs(graph, node, opset, 2, {"", "mask"})
             : node;
}

void gradDropout(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *dY = ctx.outGrad(0);
  if (!dropoutMayTrain(n, ctx.opset())) {
    ctx.setInputGrad(0, dY); // inference mode: Y = X
    return;
  }
  Value *mask = ctx.out(1);
  if (!mask)
    errorAt(n) << "internal: the mask output was not added before "
                  "differentiating";
  ctx.setInputGrad(0,
                   ctx.emitMpc("DropoutGrad", {dY, mask, ctx.in(1), ctx.in(2)},
                               {}, *ctx.in(0), ctx.gradName(0)));
}

} // namespace mpc
