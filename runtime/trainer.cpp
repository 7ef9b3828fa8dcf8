// Trainer implementation: step loop state, update bindings, checkpoints.
#include "runtime/trainer.h"

#include "passes/inference_mode.h"
#include "passes/onnx/onnx_io.h"
#include "passes/support/diagnostics.h"

#include "onnx/onnx_pb.h"

#include <chrono>

namespace mpc {

namespace {

constexpr const char *kStepsDoneKey = "mpc.run.steps_done";
constexpr const char *kSeedKey = "mpc.run.seed";
constexpr const char *kShuffleKey = "mpc.run.shuffle";

std::string metaOr(const Model &m, const std::string &key,
                   const std::string &dflt) {
  const std::string *v = m.meta(key);
  return v ? *v : dflt;
}

} // namespace

Trainer::Trainer(std::unique_ptr<Model> model, Backend &backend)
    : model_(std::move(model)) {
  if (!model_->training)
    throw Error("has no training step (training_info); compile it with "
                "mpc-opt first");
  step_ = model_->training->algorithm->clone();
  lossName_ = metaOr(*model_, "mpc.loss", "");
  if (lossName_.empty()) {
    if (step_->outputs().empty())
      throw Error("training step has no outputs");
    lossName_ = step_->outputs()[0]->name();
  }
  foundInfName_ = metaOr(*model_, "mpc.found_inf", "");
  lossScaleName_ = metaOr(*model_, "mpc.loss_scale", "");
  // Expose the values the trainer reports as outputs of its own copy.
  for (const std::string &name : {lossName_, foundInfName_}) {
    if (name.empty())
      continue;
    Value *v = step_->findValue(name);
    if (!v)
      throw Error("training step has no value '" + name +
                  "' named by its metadata");
    if (!v->isGraphOutput())
      step_->addOutput(v);
  }
  for (const auto &kv : model_->training->updateBinding) {
    Value *state = step_->findValue(kv.first);
    if (!state || !state->isInitializer())
      throw Error("update_binding: '" + kv.first +
                  "' is not state of the training step");
    Value *out = step_->findValue(kv.second);
    if (!out)
      throw Error("update_binding: '" + kv.second +
                  "' is not a value of the training step");
    if (!out->isGraphOutput())
      step_->addOutput(out);
  }
  exec_ = std::make_unique<Executor>(*step_, backend);
  if (const std::string *s = model_->meta(kStepsDoneKey))
    stepsDone_ = std::stoll(*s);
  if (const std::string *s = model_->meta(kSeedKey))
    seed = std::stoull(*s);
  if (const std::string *s = model_->meta(kShuffleKey))
    shuffle = *s == "1";
}

std::vector<DataInputSpec> Trainer::dataInputs(int64_t &batch) const {
  return describeDataInputs(*step_, batch);
}

StepRecord
Trainer::step(const std::vector<std::pair<std::string, Tensor>> &batch) {
  auto start = std::chrono::steady_clock::now();
  StepRecord rec;
  rec.step = stepsDone_ + 1;
  if (!lossScaleName_.empty())
    rec.lossScale = exec_->initializer(lossScaleName_).getAsDouble(0);
  for (const auto &kv : batch)
    exec_->setInput(kv.first, kv.second);
  uint64_t runSeed = seed * 1000003u + uint64_t(stepsDone_);
  exec_->run(runSeed);
  rec.loss = exec_->output(lossName_).getAsDouble(0);
  if (!foundInfName_.empty())
    rec.skipped = exec_->output(foundInfName_).getAsDouble(0) != 0;
  // No state has changed yet (updates are applied below), so the re-run sees
  // the same state, batch and seed, and recomputes the same outputs.
  if (rec.skipped && debugOverflow)
    rec.overflow = findFirstOverflow(*exec_, *step_, lossName_, runSeed);
  // Read every new value before writing any: a state may be bound to a value
  // that another binding also reads.
  std::vector<Tensor> updates;
  for (const auto &kv : model_->training->updateBinding)
    updates.push_back(exec_->output(kv.second));
  for (size_t i = 0; i < updates.size(); ++i)
    exec_->setInitializer(model_->training->updateBinding[i].first,
                          std::move(updates[i]));
  ++stepsDone_;
  peakBytes_ = std::max(peakBytes_, exec_->peakBytes());
  rec.ms = std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start)
               .count();
  return rec;
}

const Tensor &Trainer::state(const std::string &name) const {
  return exec_->initializer(name);
}

double Trainer::lossScale() const {
  return lossScaleName_.empty()
             ? 1.0
             : exec_->initializer(lossScaleName_).getAsDouble(0);
}

void Trainer::writeStateBack() {
  // The algorithm's state initializers share their tensors with the main
  // graph, so writing them updates the inference graph too.
  for (Value *init : model_->training->algorithm->initializers())
    if (init->isState)
      *init->initializer() = exec_->initializer(init->name());
  model_->setMeta(kStepsDoneKey, std::to_string(stepsDone_));
  model_->setMeta(kSeedKey, std::to_string(seed));
  model_->setMeta(kShuffleKey, shuffle ? "1" : "0");
}

void Trainer::saveCheckpoint(const std::string &path) {
  writeStateBack();
  onnx::ModelProto proto;
  exportModel(*model_, proto);
  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    throw Error(path + ": cannot serialize the checkpoint");
  writeFileAtomically(path, bytes);
}

void Trainer::resumeFrom(const std::string &path) {
  std::unique_ptr<Model> ckpt = loadModel(path);
  if (!ckpt->training)
    throw Error(path + ": not an mpc checkpoint (no training step)");
  const Graph &mine = *model_->training->algorithm;
  const Graph &theirs = *ckpt->training->algorithm;
  for (const Value *init : mine.initializers()) {
    if (!init->isState)
      continue;
    const Value *other = theirs.findValue(init->name());
    if (!other || !other->isInitializer())
      throw Error(path +
                  ": checkpoint does not match the model: it has no "
                  "state '" +
                  init->name() + "'");
    const Tensor &t = *other->initializer();
    if (t.dtype != init->initializer()->dtype ||
        t.dims != init->initializer()->dims)
      throw Error(path + ": checkpoint does not match the model: state '" +
                  init->name() + "' is " + dtypeName(t.dtype) + "[" +
                  dimsToString(t.dims) + "], the model has " +
                  dtypeName(init->initializer()->dtype) + "[" +
                  dimsToString(init->initializer()->dims) + "]");
  }
  for (const Value *other : theirs.initializers())
    if (other->isState && !mine.findValue(other->name()))
      throw Error(path + ": checkpoint does not match the model: state '" +
                  other->name() + "' is not in the model");
  for (const Value *init : mine.initializers())
    if (init->isState)
      exec_->setInitializer(init->name(),
                            *theirs.findValue(init->name())->initializer());
  const std::string *done = ckpt->meta(kStepsDoneKey);
  stepsDone_ = done ? std::stoll(*done) : 0;
  if (const std::string *s = ckpt->meta(kSeedKey))
    seed = std::stoull(*s);
  if (const std::string *s = ckpt->meta(kShuffleKey))
    shuffle = *s == "1";
}

void Trainer::exportInference(const std::string &path) {
  writeStateBack();
  Model inference;
  inference.irVersion = model_->irVersion;
  inference.opsets = model_->opsets;
  inference.producerName = model_->producerName;
  inference.producerVersion = model_->producerVersion;
  inference.graph = model_->graph->clone();
  switchToInferenceMode(*inference.graph);
  // Only the state the inference graph reads (parameters, statistics).
  for (Value *init : std::vector<Value *>(inference.graph->initializers()))
    if (init->uses().empty() && !init->isGraphOutput())
      inference.graph->removeInitializer(init);
  onnx::ModelProto proto;
  exportModel(inference, proto);
  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    throw Error(path + ": cannot serialize the model");
  writeFileAtomically(path, bytes);
}

} // namespace mpc
