// Validation loss during training (runtime/evaluator.h).
#include "runtime/evaluator.h"

#include "ir/step_metadata.h"
#include "passes/inference_mode.h"
#include "passes/optimizer/ema.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "support/diagnostics.h"

#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

namespace mpc {
namespace {

/// The forward's loss: the main graph output named like the step's loss
/// (mpc.loss), else its only scalar floating output.
Value *forwardLoss(const Model &model, Graph &g) {
  const std::string *name = readMeta(model, meta::kLoss);
  Value *scalar = nullptr;
  int scalars = 0;
  for (Value *out : g.outputs()) {
    if (name && out->name() == *name)
      return out;
    if (isFloating(out->dtype) && out->hasShape && out->rank() == 0) {
      scalar = out;
      ++scalars;
    }
  }
  if (scalars != 1)
    throw Error("the model's forward (its main graph) has no scalar loss "
                "output to evaluate");
  return scalar;
}

} // namespace

Evaluator::Evaluator(const Trainer &trainer, Backend &backend, int64_t batch,
                     bool ema, bool allOutputs)
    : batch_(batch) {
  const Model &model = trainer.model();
  Model forward;
  forward.irVersion = model.irVersion;
  forward.opsets = model.opsets;
  forward.graph = model.graph->clone();
  Graph &g = *forward.graph;
  // The loss alone, or with the other outputs: a batch norm's running
  // statistics never, they would keep the training form alive.
  Value *loss = forwardLoss(model, g);
  lossName_ = loss->name();
  std::vector<Value *> kept;
  for (Value *out : g.outputs()) {
    const Node *p = out->producer();
    bool runningStat = p && p->opType() == "BatchNormalization" &&
                       p->domain().empty() && out->producerIndex() > 0;
    if (out == loss || (allOutputs && !runningStat))
      kept.push_back(out);
  }
  g.clearOutputs();
  for (Value *out : kept)
    g.addOutput(out);
  switchToInferenceMode(g);

  // The samples' dims are the training step's (the forward may keep the
  // export's symbolic ones, e.g. a sequence length --input-shape fixed for
  // the step); an input the step does not read keeps the forward's own.
  const Graph &step = *model.training->algorithm;
  for (Value *in : g.inputs()) {
    const Value *trained = step.findValue(in->name());
    if (trained && trained->isGraphInput() && trained->hasShape &&
        in->hasShape && trained->rank() == in->rank() && in->rank() > 0)
      for (size_t d = 1; d < in->dims.size(); ++d)
        if (trained->dims[d].isKnown())
          in->dims[d] = trained->dims[d];
  }
  int64_t b = batch;
  CompileOptions options;
  for (const DataInputSpec &s : describeDataInputs(g, b)) {
    std::vector<int64_t> dims = {batch};
    dims.insert(dims.end(), s.sampleDims.begin(), s.sampleDims.end());
    options.inputShapes.emplace_back(s.name, dims);
  }
  Statistics stats;
  runPipeline(forward, parsePipeline("verify,infer-shapes,fold-constants"),
              options, PipelineConfig{}, stats);
  forward_ = std::move(forward.graph);

  std::unordered_set<std::string> state;
  for (const Value *init : model.training->algorithm->initializers())
    if (init->isState)
      state.insert(init->name());
  std::unordered_map<std::string, std::string> averaged;
  if (ema) {
    for (const auto &[param, average] : emaPairs(model))
      averaged[param] = average;
    if (averaged.empty())
      throw Error("the model keeps no moving average of its parameters "
                  "(compile it with mpc-opt --ema-decay=D)");
  }
  for (const Value *init : forward_->initializers())
    if (state.count(init->name())) {
      auto it = averaged.find(init->name());
      stateNames_.emplace_back(init->name(), it == averaged.end() ? init->name()
                                                                  : it->second);
    }
  exec_ = std::make_unique<Executor>(*forward_, backend);
}

std::vector<DataInputSpec> Evaluator::dataInputs() const {
  int64_t b = batch_;
  return describeDataInputs(*forward_, b);
}

void Evaluator::requireOneBatch(const Dataset &data,
                                const std::string &source) const {
  if (data.numSamples() < batch_)
    throw Error(source + ": holds " + std::to_string(data.numSamples()) +
                " samples, fewer than one batch of " + std::to_string(batch_));
}

void Evaluator::bindState(const Trainer &trainer) {
  std::vector<std::string> sources;
  for (const auto &names : stateNames_)
    sources.push_back(names.second);
  std::vector<Tensor> values = trainer.wholeStates(sources);
  for (size_t i = 0; i < values.size(); ++i)
    exec_->setInitializer(stateNames_[i].first, std::move(values[i]));
}

std::vector<std::pair<std::string, Tensor>>
Evaluator::outputsOf(const Trainer &trainer, const Trainer::Batch &batch) {
  bindState(trainer);
  return outputsOfBound(batch);
}

std::vector<std::pair<std::string, Tensor>>
Evaluator::outputsOfBound(const Trainer::Batch &batch) {
  for (const auto &[name, tensor] : batch)
    exec_->setInput(name, tensor);
  exec_->run();
  std::vector<std::pair<std::string, Tensor>> outputs;
  for (size_t i = 0; i < forward_->outputs().size(); ++i)
    outputs.emplace_back(forward_->outputs()[i]->name(), exec_->output(i));
  return outputs;
}

EvalResult Evaluator::evaluate(const Trainer &trainer, const Dataset &data,
                               const std::string &source, Collective *world) {
  requireOneBatch(data, source);
  const int64_t batches = data.numSamples() / batch_;
  bindState(trainer);
  const int ranks = world ? world->size() : 1;
  const int rank = world ? world->rank() : 0;
  // Round k: rank r evaluates batch k * ranks + r; every rank learns every
  // batch's loss (NaN: past the last batch) and sums them in batch order.
  double sum = 0;
  for (int64_t first = 0; first < batches; first += ranks) {
    double mine = std::numeric_limits<double>::quiet_NaN();
    if (first + rank < batches) {
      for (const auto &[name, tensor] :
           data.batch(first + rank, batch_, false, 0))
        exec_->setInput(name, tensor);
      exec_->run();
      mine = exec_->output(lossName_).getAsDouble(0);
    }
    std::vector<double> losses =
        ranks > 1 ? gatherFromRanks(*world, mine) : std::vector<double>{mine};
    for (int64_t r = 0; r < ranks && first + r < batches; ++r)
      sum += losses[size_t(r)];
  }
  return {sum / double(batches), batches * batch_};
}

} // namespace mpc
