// The parameters' exponential moving average (passes/optimizer/ema.h).
#include "passes/optimizer/ema.h"

#include "ir/builder.h"
#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "passes/training_support.h"
#include "support/diagnostics.h"
#include "support/joined.h"

#include <cmath>

namespace mpc {

namespace {

/// A standard op with one output named `name` (fresh if taken), typed as
/// `like` (nullptr: untyped).
Value *op(Graph &g, const char *type, const std::vector<Value *> &inputs,
          const std::string &name, const Value *like) {
  Node *n = createNamedNode(g, type, "", inputs, {name}, name);
  if (like)
    n->output(0)->copyTypeFrom(*like);
  return n->output(0);
}

} // namespace

void checkEmaDecay(double decay) {
  if (!(decay >= 0 && decay < 1))
    throw Error("--ema-decay: must be in [0, 1), got " + formatNumber(decay));
}

void addParameterEma(Model &model, const std::vector<Value *> &params,
                     const std::vector<Value *> &updated, Value *boundary,
                     double decay, Statistics &stats) {
  checkEmaDecay(decay);
  Graph &g = *model.training->algorithm;
  Builder b(g);
  Value *count = addState(model, "ema_count", Tensor::scalar(DType::I64, 0));
  Value *first = op(g, "Equal", {count, b.scalar(DType::I64, 0, "ema_zero")},
                    "ema_first", nullptr);
  first->setType(DType::Bool, {});
  // ATen's lerp on fp32 with the Python float weight 1 - D: the weight as
  // float, and of its two formulas the one |weight| < 0.5 picks (fixed
  // here, the weight being a constant).
  const float weight = float(1.0 - decay);
  const bool small = std::fabs(weight) < 0.5f;
  Value *w = b.scalar(DType::F32, small ? weight : 1.0f - weight,
                      small ? "ema_weight" : "ema_one_minus_weight");
  std::string pairs;
  for (size_t i = 0; i < params.size(); ++i) {
    Value *p = params[i], *now = updated[i];
    const std::string base = p->name() + "_ema";
    Value *ema =
        addState(model, base, Tensor::zeros(p->dtype, p->initializer()->dims));
    Value *diff = op(g, "Sub", {now, ema}, base + "_diff", p);
    // small: ema + w (now - ema); else now - (now - ema)(1 - w).
    Value *lerped =
        small ? op(g, "Add", {ema, op(g, "Mul", {w, diff}, base + "_step", p)},
                   base + "_lerp", p)
              : op(g, "Sub", {now, op(g, "Mul", {diff, w}, base + "_step", p)},
                   base + "_lerp", p);
    Value *next = op(g, "Where", {first, now, lerped},
                     boundary ? base + "_next" : base + "_new", p);
    if (boundary)
      next = op(g, "Where", {boundary, next, ema}, base + "_new", p);
    bindState(model, ema, next);
    pairs += joined(pairs.empty() ? "" : ",", p->name() + "=", ema->name());
  }
  // mpc.IncrementStep: the CUDA backend's Add takes no int64.
  const std::string countName = boundary ? "ema_count_next" : "ema_count_new";
  Node *inc = createNamedNode(g, "IncrementStep", kMpcDomain, {count},
                              {countName}, countName);
  inc->output(0)->copyTypeFrom(*count);
  Value *counted = inc->output(0);
  if (boundary)
    counted =
        op(g, "Where", {boundary, counted, count}, "ema_count_new", count);
  bindState(model, count, counted);
  writeMeta(model, meta::kEma, pairs);
  writeMeta(model, meta::kEmaDecay, formatNumber(decay));
  stats["ema-parameters"] += int64_t(params.size());
}

std::vector<std::pair<std::string, std::string>> emaPairs(const Model &model) {
  return readMetaPairs(model, meta::kEma);
}

} // namespace mpc
