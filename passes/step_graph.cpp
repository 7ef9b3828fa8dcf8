// The training step as mpc-run executes it (see step_graph.h).
#include "passes/step_graph.h"

#include "passes/support/diagnostics.h"

namespace mpc {

std::string stepLossName(const Model &model, const Graph &step) {
  if (const std::string *s = model.meta("mpc.loss"))
    if (!s->empty())
      return *s;
  if (step.outputs().empty())
    throw Error("training step has no outputs");
  return step.outputs()[0]->name();
}

std::unique_ptr<Graph> runnableStep(const Model &model) {
  if (!model.training)
    throw Error("has no training step (training_info); compile it with "
                "mpc-opt first");
  std::unique_ptr<Graph> step = model.training->algorithm->clone();
  std::string loss = stepLossName(model, *step);
  const std::string *foundInf = model.meta("mpc.found_inf");
  for (const std::string &name : {loss, foundInf ? *foundInf : ""}) {
    if (name.empty())
      continue;
    Value *v = step->findValue(name);
    if (!v)
      throw Error("training step has no value '" + name +
                  "' named by its metadata");
    if (!v->isGraphOutput())
      step->addOutput(v);
  }
  for (const auto &kv : model.training->updateBinding) {
    Value *state = step->findValue(kv.first);
    if (!state || !state->isInitializer())
      throw Error("update_binding: '" + kv.first +
                  "' is not state of the training step");
    Value *out = step->findValue(kv.second);
    if (!out)
      throw Error("update_binding: '" + kv.second +
                  "' is not a value of the training step");
    if (!out->isGraphOutput())
      step->addOutput(out);
  }
  return step;
}

} // namespace mpc
