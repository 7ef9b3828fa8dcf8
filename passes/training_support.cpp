// Helpers shared by loss-scale, master-weights and optimizer.
#include "passes/training_support.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace mpc {

TrainingValues requireGradients(Model &model, const std::string &pass) {
  if (!model.training || !hasMeta(model, meta::kGrads) ||
      !hasMeta(model, meta::kParams))
    throw Error(pass + ": no gradients (run autodiff first)");
  TrainingValues tv;
  tv.algorithm = model.training->algorithm.get();
  Graph &g = *tv.algorithm;
  std::vector<std::string> paramNames = readMeta(model, meta::kParams);
  std::vector<std::string> gradNames = readMeta(model, meta::kGrads);
  if (paramNames.empty())
    throw Error(pass + ": the model has no trainable parameters (mpc.params "
                       "is empty)");
  if (paramNames.size() != gradNames.size())
    throw Error(pass + ": mpc.params lists " +
                std::to_string(paramNames.size()) +
                " parameters but mpc.grads " +
                std::to_string(gradNames.size()) + " gradients");
  for (size_t i = 0; i < paramNames.size(); ++i) {
    Value *p = g.findValue(paramNames[i]);
    if (!p || !p->isInitializer() || !p->isState)
      throw Error(pass + ": parameter '" + paramNames[i] +
                  "' (mpc.params) is not a state initializer of the training "
                  "algorithm");
    Value *grad = g.findValue(gradNames[i]);
    if (!grad)
      throw Error(pass + ": gradient '" + gradNames[i] +
                  "' (mpc.grads) is not a value of the training algorithm");
    tv.params.push_back(p);
    tv.grads.push_back(grad);
  }
  return tv;
}

void refuseIfMeta(const Model &model, const std::string &pass,
                  std::string_view key, const std::string &reason) {
  if (model.meta(std::string(key)))
    throw Error(pass + ": " + reason + " (" + std::string(key) + " is set)");
}

Value *addState(Model &model, const std::string &hint, Tensor data) {
  Graph &g = *model.training->algorithm;
  auto taken = [&](const std::string &name) {
    return g.findValue(name) || model.graph->findValue(name);
  };
  std::string name = hint;
  for (int i = 1; taken(name); ++i)
    name = hint + "_" + std::to_string(i);
  Value *v = g.addInitializer(name, std::move(data));
  v->isState = true;
  return v;
}

Node *firstUser(const Graph &g, const Value *v) {
  for (const auto &n : g.nodes())
    for (const Value *in : n->inputs())
      if (in == v)
        return n.get();
  return nullptr;
}

Value *castOrReuse(Graph &g, Value *v, DType to, Node *before,
                   int64_t &inserted) {
  for (const Use &u : v->uses()) {
    Node *n = u.user;
    if (n->opType() == "Cast" && n->domain().empty() && u.index == 0 &&
        n->attrInt("to", -1) == toOnnxDataType(to) && n->output(0))
      return n->output(0);
  }
  Node *cast =
      createNamedNode(g, "Cast", "", {v}, {v->name() + "_" + dtypeName(to)},
                      "cast_" + v->name(), before);
  cast->setAttr("to", Attribute::ofInt(toOnnxDataType(to)));
  Value *out = cast->output(0);
  out->copyTypeFrom(*v);
  out->dtype = to;
  ++inserted;
  return out;
}

Node *createNamedNode(Graph &g, const std::string &opType,
                      const std::string &domain,
                      const std::vector<Value *> &inputs,
                      const std::vector<std::string> &outputHints,
                      const std::string &nodeHint, Node *before) {
  std::vector<std::string> names;
  names.reserve(outputHints.size());
  // The names picked so far, for a node with many outputs (ClipGradNorm has
  // one per parameter): a scan of `names` per name was quadratic. Views of
  // the strings in `names`, which never reallocates (reserved above).
  std::unordered_set<std::string_view> picked;
  const bool useSet = outputHints.size() > 8;
  auto isPicked = [&](const std::string &name) {
    return useSet ? picked.count(name) != 0
                  : std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const std::string &hint : outputHints) {
    // uniqueValueName does not reserve: also avoid names picked just now.
    std::string name = g.uniqueValueName(hint);
    for (int i = 1; isPicked(name); ++i)
      name = g.uniqueValueName(hint + "_" + std::to_string(i));
    names.push_back(std::move(name));
    if (useSet)
      picked.insert(names.back());
  }
  return g.createNodeWithOutputs(opType, inputs, std::move(names),
                                 g.uniqueNodeName(nodeHint), domain, before);
}

void replaceGradients(Model &model, TrainingValues &tv,
                      const std::vector<Value *> &newGrads) {
  Graph &g = *tv.algorithm;
  // Where each value is a graph output, kept up to date as outputs are
  // replaced (a scan of the outputs per gradient was quadratic).
  std::unordered_map<const Value *, std::vector<size_t>> outputAt;
  for (size_t k = 0; k < g.outputs().size(); ++k)
    outputAt[g.outputs()[k]].push_back(k);
  std::vector<std::string> names;
  for (size_t i = 0; i < tv.grads.size(); ++i) {
    if (newGrads[i] != tv.grads[i]) {
      auto it = outputAt.find(tv.grads[i]);
      if (it != outputAt.end()) {
        std::vector<size_t> positions = std::move(it->second);
        outputAt.erase(it);
        for (size_t k : positions)
          g.setOutput(k, newGrads[i]);
        auto &now = outputAt[newGrads[i]];
        now.insert(now.end(), positions.begin(), positions.end());
      }
    }
    tv.grads[i] = newGrads[i];
    names.push_back(newGrads[i]->name());
  }
  writeMeta(model, meta::kGrads, names);
}

void bindState(Model &model, const Value *state, Value *newValue) {
  model.training->algorithm->addOutput(newValue);
  model.training->updateBinding.emplace_back(state->name(), newValue->name());
}

void ensureMpcOpset(Model &model) {
  if (model.opsetVersion(kMpcDomain) < 0)
    model.setOpsetVersion(kMpcDomain, 1);
}

std::string formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

} // namespace mpc
