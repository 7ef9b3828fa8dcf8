// fold-unscale: the updates unscale the gradients they read
// (passes/fold_unscale.h).
#include "passes/fold_unscale.h"

#include "ir/mpc_ops.h"
#include "passes/precision_map.h"

#include <string>

namespace mpc {
namespace {

/// The update that is the only reader of the unscaled gradient `out`, reading
/// it as its gradient (input 3) and able to unscale `g` itself (an fp32
/// master, g fp32/fp16/bf16, no loss scale of its own yet); else nullptr.
Node *soleUpdateOf(const Value *out, const Value *g) {
  if (!out || out->isGraphOutput() || out->uses().size() != 1 || !g)
    return nullptr;
  const Use &u = out->uses()[0];
  Node *update = u.user;
  const int at = gradScaleInput(update->domain(), update->opType());
  if (at < 0 || u.index != 3 || update->input(size_t(at)))
    return nullptr;
  const Value *p = update->input(2);
  if (!p || p->dtype != DType::F32)
    return nullptr;
  if (g->dtype != DType::F32 && g->dtype != DType::F16 &&
      g->dtype != DType::BF16)
    return nullptr;
  return update;
}

/// Folds UnscaleGradients node n's multiplies into the updates that read
/// its outputs. Each unscaled gradient is replaced by the gradient it was
/// made of, so metadata naming it (mpc.grads) follows to what the update
/// reads (ir/metadata_value_refs.cpp). Returns how many were folded.
int64_t foldInto(Model &model, Graph &g, Node *n) {
  Value *scale = n->input(0);
  if (!scale || scale->dtype != DType::F32)
    return 0;
  int64_t folded = 0;
  for (size_t i = 1; i < n->numInputs() && i < n->numOutputs(); ++i) {
    Value *grad = n->input(i), *out = n->output(i);
    Node *update = soleUpdateOf(out, grad);
    if (!update)
      continue;
    g.replaceAllUsesWith(out, grad); // the update's gradient input
    update->setInput(size_t(gradScaleInput(update->domain(), update->opType())),
                     scale);
    n->omitOutput(i);
    if (std::optional<PrecisionRecord> r = recordCopyOf(model, g, *update)) {
      r->detail += "; unscales its gradient as it reads it (fold-unscale)";
      precisionMapOf(model, g)->record(*update, *r);
    }
    ++folded;
  }
  // The node's record says what is left of it: the check, in fp32 (its
  // values alone would say bool), and the unscaling of the others.
  if (folded)
    if (std::optional<PrecisionRecord> r = recordCopyOf(model, g, *n)) {
      const int64_t kept = int64_t(n->numInputs()) - 1 - folded;
      r->dtype = DType::F32;
      r->detail = "added by loss-scale after autocast: checks the gradients "
                  "for inf/NaN in fp32; " +
                  (kept ? std::to_string(folded) + " of them are"
                        : std::string("they are")) +
                  " unscaled by the updates that read them (fold-unscale)";
      precisionMapOf(model, g)->record(*n, *r);
    }
  return folded;
}

} // namespace

void runFoldUnscale(Model &model, PassContext &ctx) {
  if (!model.training) {
    ctx.changedNothing = true;
    return;
  }
  Graph &g = *model.training->algorithm;
  int64_t folded = 0;
  for (const auto &n : g.nodes())
    if (n->isOp(kMpcDomain, "UnscaleGradients"))
      folded += foldInto(model, g, n.get());
  if (!folded) {
    ctx.changedNothing = true;
    return;
  }
  ctx.stats["gradients-unscaled-by-updates"] += folded;
}

} // namespace mpc
