// PyTrainer (python/py_trainer.h).
#include "python/py_trainer.h"

#include "support/diagnostics.h"

#include <cstdio>

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

std::unique_ptr<Backend> backendFor(const std::string &device) {
  if (device == "cpu")
    return createCpuBackend();
  if (device == "cuda")
    throw Error("device 'cuda': the mpc module runs on the cpu only for now "
                "(train on a GPU with mpc-run --device=cuda)");
  throw Error("device '" + device + "': expected 'cpu'");
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
    // As mpc-run says it: about the model unless it names another file.
    std::string msg = e.what();
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

Evaluator &PyTrainer::evaluator() {
  if (!evaluator_)
    evaluator_ = std::make_unique<Evaluator>(trainer(), *backend_, batch_,
                                             /*ema=*/false,
                                             /*allOutputs=*/true);
  return *evaluator_;
}

std::vector<DataInputSpec> PyTrainer::evalInputs() {
  return evaluator().dataInputs();
}

std::vector<std::pair<std::string, Tensor>>
PyTrainer::evaluate(const Trainer::Batch &batch) {
  return evaluator().outputsOf(trainer(), batch);
}

} // namespace mpc
