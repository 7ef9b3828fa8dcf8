// weight-copies: the 16-bit working copies of the master weights kept as
// state (passes/weight_copies.h).
#include "passes/weight_copies.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "passes/precision_map.h"
#include "passes/registry.h"
#include "passes/training_support.h"
#include "support/diagnostics.h"

#include <optional>
#include <unordered_map>

namespace mpc {
namespace {

constexpr const char *kPass = "weight-copies";

bool isLowPrecision(DType t) { return t == DType::F16 || t == DType::BF16; }

/// The Casts of p to a 16-bit type that a copy can replace: every such Cast
/// of p's own graph reading p (input 0), when they all cast to one type
/// and none is in a subgraph (If/Loop bodies keep theirs); empty otherwise.
std::vector<Node *> lowCastsOf(const Value *p) {
  std::vector<Node *> casts;
  DType to = DType::Undefined;
  for (const Use &u : p->uses()) {
    Node *c = u.user;
    if (!c->isOp("", "Cast") || u.index != 0 || !c->output(0) ||
        !isLowPrecision(c->output(0)->dtype))
      continue;
    if (c->owner() != p->owner())
      return {};
    if (to != DType::Undefined && c->output(0)->dtype != to)
      return {};
    to = c->output(0)->dtype;
    casts.push_back(c);
  }
  return casts;
}

} // namespace

std::vector<std::pair<std::string, std::string>>
weightCopyPairs(const Model &model) {
  return readMetaPairs(model, meta::kWeightCopies);
}

void checkWeightCopies(const Model &model) {
  std::vector<std::pair<std::string, std::string>> pairs =
      weightCopyPairs(model);
  if (pairs.empty())
    return;
  if (!model.training)
    throw Error("mpc.weight_copies: the model has no training step");
  const Graph &g = *model.training->algorithm;
  std::unordered_map<std::string, std::string> newValueOf;
  for (const auto &[state, value] : model.training->updateBinding)
    newValueOf[state] = value;
  std::unordered_map<std::string, int> seen;
  for (const auto &[master, copy] : pairs) {
    auto fail = [&, &m = master, &c = copy](const std::string &why) {
      throw Error("mpc.weight_copies pairs master '" + m + "' with copy '" + c +
                  "': " + why);
    };
    if (seen[master]++ || seen[copy]++)
      fail("a state named in two pairs");
    const Value *m = g.findValue(master), *c = g.findValue(copy);
    if (!m || !m->isState || !m->isInitializer() || !c || !c->isState ||
        !c->isInitializer())
      fail("they are not both state of the training step");
    if ((c->dtype != DType::F16 && c->dtype != DType::BF16) ||
        c->initializer()->dims != m->initializer()->dims)
      fail("the copy is " + std::string(dtypeName(c->dtype)) + "[" +
           dimsToString(c->initializer()->dims) +
           "], not a 16-bit copy of the master (" + dtypeName(m->dtype) + "[" +
           dimsToString(m->initializer()->dims) + "])");
    auto nm = newValueOf.find(master), nc = newValueOf.find(copy);
    const Value *mNew =
        nm == newValueOf.end() ? nullptr : g.findValue(nm->second);
    const Value *cNew =
        nc == newValueOf.end() ? nullptr : g.findValue(nc->second);
    const Node *p = cNew ? cNew->producer() : nullptr;
    bool castOfNew =
        p && mNew &&
        ((p->isOp("", "Cast") && p->input(0) == mNew) ||
         (p == mNew->producer() && mNew->producerIndex() == 0 &&
          cNew->producerIndex() == lowCopyOutput(p->domain(), p->opType())));
    if (!castOfNew || cNew->dtype != c->dtype)
      fail("the step does not write the copy as the Cast of the master's new "
           "value");
  }
}

void runWeightCopies(Model &model, PassContext &ctx) {
  checkPassOrder(model, kPass);
  // Nothing updates the parameters yet (a --passes list without an
  // optimizer), the masters are sharded, or memory comes first
  // (--memory-budget: the copies' 2 bytes per parameter would raise the
  // floor the budget is measured against): no copies.
  if (!model.training || !hasMeta(model, meta::kOptimizer) ||
      hasMeta(model, meta::kShardedState) || ctx.options.memoryBudget > 0) {
    ctx.changedNothing = true;
    return;
  }
  Graph &g = *model.training->algorithm;
  // The value each state is bound to (the last binding of a name wins).
  std::unordered_map<std::string, std::string> newValueOf;
  for (const auto &[state, value] : model.training->updateBinding)
    newValueOf[state] = value;

  std::vector<std::string> pairs;
  for (const std::string &name : readMeta(model, meta::kParams)) {
    Value *p = g.findValue(name);
    if (!p || !p->isInitializer() || !p->isState ||
        (p->dtype != DType::F32 && p->dtype != DType::F64))
      continue;
    auto bound = newValueOf.find(name);
    Value *updated =
        bound == newValueOf.end() ? nullptr : g.findValue(bound->second);
    std::vector<Node *> casts = lowCastsOf(p);
    if (!updated || casts.empty())
      continue;
    const DType low = casts[0]->output(0)->dtype;
    // The Casts' readers read the copy, which takes the first Cast's name
    // once the Casts are gone (the forward reads `P_fp16` as before).
    const std::string name0 = casts[0]->output(0)->name();
    Value *copy = addState(model, name0 + "_state",
                           p->initializer()->castTo(low)); // the Casts' bits
    copy->copyTypeFrom(*casts[0]->output(0));
    for (Node *c : casts) {
      g.replaceAllUsesWith(c->output(0), copy);
      g.removeNode(c);
    }
    g.renameValue(copy, name0);
    // The copy of the new master, bound to the copy: written by the update
    // itself where it can (its `low` output), else by a Cast after it.
    Value *next = nullptr;
    Node *update = updated->producer();
    const int at = update && updated->producerIndex() == 0
                       ? lowCopyOutput(update->domain(), update->opType())
                       : -1;
    if (at > 0 &&
        (update->isOp(kMpcDomain, "SGD") || update->isOp(kMpcDomain, "Adam")) &&
        update->numOutputs() <= size_t(at)) {
      while (update->numOutputs() < size_t(at))
        update->addOmittedOutput();
      next = update->addOutput(copy->name() + "_new");
      update->setAttr("low", Attribute::ofInt(toOnnxDataType(low)));
      if (std::optional<PrecisionRecord> r = recordCopyOf(model, g, *update)) {
        r->detail += std::string("; writes the master's ") + dtypeName(low) +
                     " working copy too (weight-copies)";
        precisionMapOf(model, g)->record(*update, *r);
      }
      ctx.stats["written-by-update"] += 1;
    } else {
      Node *cast =
          createNamedNode(g, "Cast", "", {updated}, {copy->name() + "_new"},
                          "cast_" + copy->name());
      cast->setAttr("to", Attribute::ofInt(toOnnxDataType(low)));
      next = cast->output(0);
    }
    next->copyTypeFrom(*copy);
    bindState(model, copy, next);
    pairs.push_back(name + "=" + copy->name());
    ctx.stats["weight-copies"] += 1;
    ctx.stats["casts-replaced"] += int64_t(casts.size());
  }
  if (pairs.empty()) {
    ctx.changedNothing = true;
    return;
  }
  std::string text;
  for (const std::string &pair : pairs)
    text += (text.empty() ? "" : ",") + pair;
  writeMeta(model, meta::kWeightCopies, text);
}

} // namespace mpc
