// PyTrainer (python/py_trainer.h).
#include "python/py_trainer.h"

#include "python/cuda_device.h"
#include "support/diagnostics.h"

#include <cctype>
#include <cstdio>
#include <utility>

namespace mpc {
namespace {

/// The session's lines on stderr, prefixed as mpc-run's are with "mpc".
MessageSink stderrSink() {
  return [](MessageKind kind, const std::string &text) {
    const char *prefix = kind == MessageKind::Note       ? "mpc: note: "
                         : kind == MessageKind::Warning  ? "mpc: warning: "
                         : kind == MessageKind::Progress ? ""
                                                         : "mpc: ";
    std::string line = prefix + text + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
  };
}

/// "cpu", "cuda" or "cuda:N" (torch's names).
std::unique_ptr<Backend> backendFor(const std::string &device) {
  if (device == "cpu")
    return createCpuBackend();
  if (device == "cuda")
    return createModuleCudaBackend(0);
  if (device.rfind("cuda:", 0) == 0) {
    const std::string n = device.substr(5);
    if (!n.empty() && n.size() <= 4 &&
        n.find_first_not_of("0123456789") == std::string::npos)
      return createModuleCudaBackend(std::stoi(n));
  }
  throw Error("device '" + device + "': expected 'cpu', 'cuda' or 'cuda:N'");
}

} // namespace

namespace {

/// `msg` with mpc-run's flags that are mpc.Trainer keywords spelled as the
/// keywords ("give --batch=B" -> "give batch=B"); other flags stay.
std::string keywordSpelling(std::string msg) {
  static const std::pair<const char *, const char *> kKeywords[] = {
      {"--batch", "batch"},
      {"--seed", "seed"},
      {"--log", "log"},
      {"--external-data", "external_data"}};
  for (const auto &[flag, keyword] : kKeywords) {
    const std::string f = flag;
    for (size_t at = msg.find(f); at != std::string::npos;
         at = msg.find(f, at + 1)) {
      const size_t end = at + f.size();
      const char next = end < msg.size() ? msg[end] : ' ';
      if (std::isalnum(static_cast<unsigned char>(next)) || next == '-' ||
          next == '_')
        continue; // a longer flag (--log-every)
      msg.replace(at, f.size(), keyword);
    }
  }
  return msg;
}

} // namespace

PyTrainer::PyTrainer(std::unique_ptr<Model> model, const std::string &path,
                     const std::string &resume,
                     const PyTrainerOptions &options) {
  TrainingOptions o;
  o.model = path;
  o.resume = resume;
  o.seedGiven = options.seedGiven;
  o.seed = options.seed;
  o.batch = options.batch;
  o.log = options.log;
  o.externalData = options.externalData;
  o.quiet = options.quiet;
  backend_ = backendFor(options.device);
  try {
    session_ = model ? std::make_unique<TrainingSession>(std::move(model), o,
                                                         *backend_, nullptr,
                                                         stderrSink())
                     : std::make_unique<TrainingSession>(o, *backend_, nullptr,
                                                         stderrSink());
    // The memory plan, the log: every error of the run's set-up now, before
    // the first batch.
    session_->prepare();
  } catch (const Error &e) {
    // As mpc-run says it: about the model unless it names another file,
    // and with the keyword a Python caller gives for an mpc-run flag.
    std::string msg = keywordSpelling(e.what());
    bool named = msg.rfind(path, 0) == 0 ||
                 (!o.log.empty() && msg.rfind(o.log, 0) == 0) ||
                 msg.find(".onnx") != std::string::npos ||
                 msg.rfind("--", 0) == 0;
    throw Error(named ? msg : path + ": " + msg);
  }
  batch_ = session_->batch();
  int64_t b = batch_;
  specs_ = trainer().dataInputs(b);
}

PyTrainer::~PyTrainer() = default;

double PyTrainer::step(std::vector<Trainer::Batch> microBatches) {
  int64_t skippedBefore = skippedSteps();
  bool goOn = session_->step(std::move(microBatches));
  const TrainingSummary &s = session_->summary();
  lastSkipped_ = s.skipped > skippedBefore;
  if (!goOn && !s.failure.empty())
    throw Error(s.failure);
  return s.lastLoss;
}

Evaluator &PyTrainer::evaluator(int64_t samples) {
  auto it = evaluators_.find(samples);
  if (it == evaluators_.end()) {
    // A handful of sizes at most (a set's full batches and its last one);
    // past that, forget the others rather than hold an arena for each.
    if (evaluators_.size() >= 4)
      evaluators_.clear();
    it = evaluators_
             .emplace(samples, std::make_unique<Evaluator>(
                                   trainer(), *backend_, samples,
                                   /*ema=*/false, /*allOutputs=*/true))
             .first;
  }
  return *it->second;
}

std::vector<DataInputSpec> PyTrainer::evalInputs() {
  return evaluator(batch_).dataInputs();
}

std::vector<std::pair<std::string, Tensor>>
PyTrainer::evaluate(const Trainer::Batch &batch, int64_t samples) {
  // The forward as exported decides which sizes it takes.
  for (const Value *in : trainer().model().graph->inputs())
    if (in->hasShape && !in->dims.empty() && in->dims[0].isKnown() &&
        in->dims[0].value != samples)
      throw Error("batch: holds " + std::to_string(samples) +
                  " samples; the model's forward takes batches of " +
                  std::to_string(in->dims[0].value) + " ('" + in->name() +
                  "': its export fixes the batch size)");
  return evaluator(samples).outputsOf(trainer(), batch);
}

std::vector<InferenceOutput>
PyTrainer::predict(const std::vector<std::string> &outputs,
                   std::vector<InferenceInput> inputs) {
  auto it = predictors_.find(outputs);
  if (it == predictors_.end()) {
    if (predictors_.size() >= 4)
      predictors_.clear();
    it = predictors_
             .emplace(outputs, std::make_unique<Predictor>(*backend_, outputs))
             .first;
  }
  return it->second->run(trainer(), std::move(inputs));
}

} // namespace mpc
