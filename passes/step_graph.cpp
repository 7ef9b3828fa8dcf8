// The training step as mpc-run executes it (see step_graph.h).
#include "passes/step_graph.h"

#include "ir/step_metadata.h"
#include "support/diagnostics.h"

namespace mpc {

std::string stepLossName(const Model &model, const Graph &step) {
  if (const std::string *s = readMeta(model, meta::kLoss))
    if (!s->empty())
      return *s;
  if (step.outputs().empty())
    throw Error("training step has no outputs");
  return step.outputs()[0]->name();
}

std::vector<Value *> runnableStepExtraOutputs(const Model &model,
                                              const Graph &step) {
  if (!model.training)
    throw Error("has no training step (training_info); compile it with "
                "mpc-opt first");
  std::vector<Value *> extra;
  std::vector<char> listed(step.numValueIds(), 0); // by Value::id()
  // Already an output, or listed once: runnableStep adds each value once.
  auto add = [&](Value *v) {
    if (!v->isGraphOutput() && !listed[v->id()]) {
      listed[v->id()] = 1;
      extra.push_back(v);
    }
  };
  std::string loss = stepLossName(model, step);
  const std::string *foundInf = readMeta(model, meta::kFoundInf);
  const std::string *gradNorm = readMeta(model, meta::kGradNorm);
  for (const std::string &name :
       {loss, foundInf ? *foundInf : "", gradNorm ? *gradNorm : ""}) {
    if (name.empty())
      continue;
    Value *v = step.findValue(name);
    if (!v)
      throw Error("training step has no value '" + name +
                  "' named by its metadata");
    add(v);
  }
  for (const auto &kv : model.training->updateBinding) {
    Value *state = step.findValue(kv.first);
    if (!state || !state->isInitializer())
      throw Error("update_binding: '" + kv.first +
                  "' is not state of the training step");
    Value *out = step.findValue(kv.second);
    if (!out)
      throw Error("update_binding: '" + kv.second +
                  "' is not a value of the training step");
    add(out);
  }
  return extra;
}

std::unique_ptr<Graph> runnableStep(const Model &model) {
  if (!model.training)
    throw Error("has no training step (training_info); compile it with "
                "mpc-opt first");
  std::unique_ptr<Graph> step = model.training->algorithm->clone();
  for (Value *v : runnableStepExtraOutputs(model, *step))
    step->addOutput(v);
  return step;
}

} // namespace mpc
