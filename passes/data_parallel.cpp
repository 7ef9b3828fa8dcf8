// --data-parallel: the gradients' and the overflow flag's reductions across
// ranks (passes/data_parallel.h).
#include "passes/data_parallel.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "support/diagnostics.h"

#include <unordered_set>

namespace mpc {
namespace {

/// The node just after the last producer of any of `values` (nullptr: the
/// end), where their reduction goes: every value exists there, and the
/// readers that take the reduced values come later (the optimizer's
/// updates are appended after it; found_inf's other readers follow its
/// producer). Readers of the local values before it (--grad-accum's
/// buffers) keep reading those.
Node *afterLastProducerOf(const Graph &g, const std::vector<Value *> &values) {
  std::unordered_set<const Value *> set(values.begin(), values.end());
  Node *after = nullptr;
  bool seen = false;
  for (const auto &n : g.nodes()) {
    if (seen) {
      after = n.get();
      seen = false;
    }
    for (const Value *out : n->outputs())
      if (out && set.count(out)) {
        seen = true;
        after = nullptr;
      }
  }
  return after;
}

/// AllReduce<reduction>([gate,] values...): output i reduces values[i].
Node *allReduce(Graph &g, const std::vector<Value *> &values,
                const char *reduction, const std::string &suffix,
                const std::string &nodeName, Value *gate) {
  std::vector<std::string> hints;
  for (const Value *v : values)
    hints.push_back(v->name() + suffix);
  std::vector<Value *> inputs = values;
  std::vector<Value *> producedBefore = values;
  if (gate) {
    inputs.insert(inputs.begin(), gate);
    producedBefore.push_back(gate);
  }
  Node *n = createNamedNode(g, "AllReduce", kMpcDomain, inputs, hints, nodeName,
                            afterLastProducerOf(g, producedBefore));
  n->setAttr("reduction", Attribute::ofString(reduction));
  if (gate)
    n->setAttr("gated", Attribute::ofInt(1));
  for (size_t i = 0; i < values.size(); ++i)
    n->output(i)->copyTypeFrom(*values[i]);
  return n;
}

} // namespace

void checkDataParallelOptions(const CompileOptions &o,
                              const std::string &pass) {
  if (o.gradCommDtype != "fp32" && o.gradCommDtype != "bf16" &&
      o.gradCommDtype != "fp16")
    throw Error("--grad-comm-dtype: expected fp32, bf16 or fp16, got '" +
                o.gradCommDtype + "'");
  if (o.gradCommDtype != "fp32" && !o.dataParallel)
    throw Error(pass +
                ": --grad-comm-dtype needs --data-parallel (it is the type "
                "the gradients cross ranks in)");
}

void allReduceGradients(Model &model, TrainingValues &tv, Value *foundInf,
                        const std::string &pass, const std::string &wireDtype,
                        Value *gate) {
  Graph &g = *tv.algorithm;
  ensureMpcOpset(model);
  if (!tv.grads.empty()) {
    for (size_t i = 0; i < tv.grads.size(); ++i)
      if (!isFloating(tv.grads[i]->dtype))
        throw Error(pass + ": --data-parallel: gradient '" +
                    tv.grads[i]->name() + "' of parameter '" +
                    tv.params[i]->name() + "' is " +
                    dtypeName(tv.grads[i]->dtype) + ", not floating point");
    // Only the optimizer's readers, which come after, take the averages:
    // other readers of a gradient (--grad-accum's buffers) keep this
    // rank's own.
    Node *mean = allReduce(g, tv.grads, "mean", "_mean_over_ranks",
                           "all_reduce_gradients", gate);
    if (wireDtype != "fp32")
      mean->setAttr("wire_dtype", Attribute::ofString(wireDtype));
    std::vector<Value *> averaged;
    for (size_t i = 0; i < tv.grads.size(); ++i)
      averaged.push_back(mean->output(i));
    replaceGradients(model, tv, averaged);
  }
  if (foundInf) {
    Node *any = allReduce(g, {foundInf}, "max", "_on_any_rank",
                          "all_reduce_found_inf", gate);
    Value *global = any->output(0);
    g.replaceAllUsesWith(foundInf, global);
    any->setInput(gate ? 1 : 0, foundInf);
    writeMeta(model, meta::kFoundInf, global->name());
  }
  writeMeta(model, meta::kDataParallel, "1");
}

} // namespace mpc
