// Predictions in process (runtime/predictor.h).
#include "runtime/predictor.h"

#include <map>

namespace mpc {

Predictor::Predictor(Backend &backend, std::vector<std::string> outputs)
    : backend_(backend) {
  options_.outputs = std::move(outputs);
  options_.precision = DType::F32; // the master weights as they are
}

void Predictor::buildFor(Trainer &trainer) {
  if (model_ && builtAt_ == trainer.stepsDone())
    return;
  // The forward's tensors that the step trains (or otherwise updates: batch
  // norms' running statistics), at their current values; a sharded master
  // (--shard-optimizer) gathered whole.
  const Model &compiled = trainer.model();
  const Graph &step = *compiled.training->algorithm;
  std::vector<std::string> names;
  for (const Value *init : compiled.graph->initializers()) {
    const Value *state = step.findValue(init->name());
    if (state && state->isInitializer() && state->isState)
      names.push_back(init->name());
  }
  std::vector<Tensor> values = trainer.wholeStates(names);
  std::map<std::string, TensorPtr> weights;
  for (size_t i = 0; i < names.size(); ++i)
    weights[names[i]] = std::make_shared<Tensor>(std::move(values[i]));
  std::vector<std::string> notes; // choices a deployment would want told
  model_ = buildInferenceModel(compiled, options_, weights, notes);
  builtAt_ = trainer.stepsDone();
}

std::vector<InferenceOutput>
Predictor::run(Trainer &trainer, std::vector<InferenceInput> inputs) {
  buildFor(trainer);
  // runInference specialises the model it is given to these shapes: a copy
  // of the deployable one, which keeps its symbolic dimensions.
  Model m;
  m.irVersion = model_->irVersion;
  m.opsets = model_->opsets;
  m.metadata = model_->metadata;
  m.sourcePath = model_->sourcePath;
  m.graph = model_->graph->clone();
  return runInference(m, std::move(inputs), backend_);
}

std::vector<std::string> Predictor::inputNames(Trainer &trainer) {
  buildFor(trainer);
  std::vector<std::string> names;
  for (const Value *in : model_->graph->inputs())
    names.push_back(in->name());
  return names;
}

} // namespace mpc
