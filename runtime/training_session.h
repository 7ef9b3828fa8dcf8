// TrainingSession: a training run of a compiled model, as mpc-run drives it
// and as a Python binding would (mpc.Trainer): load the step, read the data,
// step, evaluate, and apply the run's policies — the --eval-every cadence,
// ReduceLROnPlateau, the best checkpoint, --early-stop, the skipped-step
// limit, the data order of each epoch and rank, the CSV logs, checkpoints
// and exports — with no flag parsing and no printing of its own.
//
// Lines for the user (progress, evaluations, notes, warnings) go to a
// MessageSink; the caller decides where they go and how they are prefixed.
// A stop request (requestStop, safe to call from a signal handler) ends the
// run after the current step, with its checkpoint.
#pragma once

#include "kernels/collective.h"
#include "passes/inference_model.h"
#include "runtime/backend.h"
#include "runtime/data/batch_prefetch.h"
#include "runtime/data/dataset.h"
#include "runtime/eval_metrics.h"
#include "runtime/eval_policy.h"
#include "runtime/evaluator.h"
#include "runtime/run_length.h"
#include "runtime/tensorboard_writer.h"
#include "runtime/trainer.h"
#include "runtime/training_log.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mpc {

/// What a training run is asked to do: a plain struct (mpc-run fills it
/// from its flags; a binding from keyword arguments).
struct TrainingOptions {
  std::string model;  ///< the compiled model (mpc-opt's output)
  std::string resume; ///< a checkpoint to go on from ("": start afresh)
  bool seedGiven = false;
  uint64_t seed = 0;
  bool shuffle = false;
  bool externalData = false; ///< checkpoints' tensors always in PATH.data

  /// The training data: an .npz or a directory of NAME.npy files
  /// (runtime/data/dataset.h), or `synthetic` samples.
  std::string data;
  /// Further sources read after `data`, as one data set (shards).
  std::vector<std::string> moreData;
  bool synthetic = false;
  int64_t batch = 0; ///< 0: the model's own batch size
  int64_t steps = 100;
  int64_t epochs = 0; ///< > 0: to this many epochs in all, not `steps`
  /// The memory the step and the data may take (else the device's).
  bool memoryLimitGiven = false;
  size_t memoryLimit = 0;

  /// The validation set and its policies (runtime/eval_policy.h).
  std::string evalData, evalLog, saveBest;
  std::vector<std::string> moreEvalData; ///< read after evalData, as data
  int64_t evalEvery = 0, earlyStop = 0;
  bool evalEma = false;
  /// --eval-metrics (runtime/eval_metrics.h: "accuracy,top5"; "": the
  /// loss only) of the output --eval-output ("": the only logits).
  std::string evalMetrics, evalOutput;

  std::string log; ///< the CSV of the steps ("": none)
  /// A directory for TensorBoard event files of the steps and evaluations
  /// ("": none; runtime/tensorboard_writer.h).
  std::string tensorboard;
  std::string save; ///< the checkpoint at the end (and every saveEvery)
  int64_t saveEvery = 0;

  bool debugOverflow = false;
  double minLossScale = 1;
  int64_t maxSkippedSteps = 100;

  std::string exportInference, exportSafetensors;
  InferenceExportOptions exportOptions; ///< outputs, precision, ema
  bool exportEma = false;
  /// Load (and resume), then save and export only: no data, no steps.
  bool exportOnly = false;

  /// No progress or evaluation lines (notes and warnings still come).
  bool quiet = false;
};

/// A line for the user; the sink adds the prefix its kind calls for.
enum class MessageKind {
  Progress, ///< progress, evaluations, rate changes: as they are
  Note,     ///< something the user may want to know
  Warning,  ///< something that is probably not what the user meant
  Event,    ///< the run ends early (early stop, interrupted)
  RankLine, ///< about this rank's step (overflow diagnosis)
};
using MessageSink = std::function<void(MessageKind, const std::string &)>;

/// How a run ended, and what the summary reports.
struct TrainingSummary {
  int64_t steps = 0, skipped = 0; ///< steps run by this call, skipped ones
  double lastLoss = 0;
  /// The last step's gradient norm before clipping (StepRecord::gradNorm):
  /// nullopt when the step does not clip (mpc-opt --max-grad-norm).
  std::optional<double> lastGradNorm;
  double totalMs = 0;      ///< the steps' own time
  double trainSeconds = 0; ///< wall time of the loop
  bool stopRequested = false;
  /// The last evaluation (step -1: none).
  EvalResult lastEval;
  /// Its metrics (name, value), with --eval-metrics.
  std::vector<std::pair<std::string, double>> lastMetrics;
  int64_t lastEvalStep = -1;
  /// Non-empty: the run failed (the skipped-step limit), this is why.
  std::string failure;
};

class TrainingSession {
public:
  /// Loads the model on `backend`, checks it against the options and
  /// resumes it. `world`: the data-parallel world this process is a rank of
  /// (nullptr: one rank; not owned). Throws Error on bad input.
  TrainingSession(TrainingOptions options, Backend &backend,
                  Collective *world = nullptr, MessageSink sink = {});
  /// The same on a compiled model in memory (options.model still names it
  /// in errors).
  TrainingSession(std::unique_ptr<Model> model, TrainingOptions options,
                  Backend &backend, Collective *world = nullptr,
                  MessageSink sink = {});
  ~TrainingSession();

  /// Reads the data and the validation set and opens the logs, after
  /// checking the step's memory plan: every error of the run's input comes
  /// before its first step. run() and step() call it when not yet done.
  /// Without data (options.data empty, not synthetic) every batch comes
  /// from the caller, through step(microBatches).
  void prepare();

  /// Runs the whole run (options.steps or epochs) and ends it: the last
  /// evaluation, the checkpoint, the exports. Returns the summary; a run
  /// that failed says why in `failure`.
  TrainingSummary run();
  /// One optimizer step on the next batches of the data set, with every
  /// policy applied (log row, progress, evaluation, checkpoints). Returns
  /// false when the run must end (early stop, the skipped-step limit).
  bool step();
  /// One optimizer step on the given micro-batches, policies applied.
  bool step(std::vector<Trainer::Batch> microBatches);

  /// The validation loss now; `scheduled` evaluations (the cadence's, or a
  /// run's only one) are logged and feed the plateau rule, the best loss,
  /// --save-best and --early-stop.
  EvalResult evaluate(bool scheduled = true);

  /// Writes a checkpoint, the logs synced first (so that none is behind it).
  void saveCheckpoint(const std::string &path);
  /// --export-inference and --export-safetensors from the current state;
  /// returns a line for each file written (what mpc-run reports on stdout).
  std::vector<std::string> writeExports();

  /// Asks the run to end after the current step (with its checkpoint).
  /// Async-signal-safe.
  void requestStop() { stopRequested_.store(true); }
  bool stopRequested() const { return stopRequested_.load(); }

  Trainer &trainer() { return *trainer_; }
  const TrainingOptions &options() const { return options_; }
  /// The run's steps (after prepare): what is left of epochs, or steps.
  int64_t plannedSteps() const { return steps_; }
  const EpochPlan &epochs() const { return epochs_; }
  int64_t batch() const { return batch_; }
  const TrainingSummary &summary() const { return summary_; }

private:
  bool runStep(const std::function<Trainer::Batch(int64_t)> &microBatch);
  /// runStep's halves: the launch (with its overflow diagnosis decided),
  /// and the policies on the oldest launched step's record.
  void launchStep(const std::function<Trainer::Batch(int64_t)> &microBatch);
  bool consumeStep();
  /// The next optimizer step's micro-batches of the data set.
  std::function<Trainer::Batch(int64_t)> dataBatches();
  /// prepare()'s part after the training data: the validation set, logs.
  void finishPrepare();
  void say(MessageKind kind, const std::string &line);
  bool lead() const { return !world_ || world_->rank() == 0; }

  TrainingOptions options_;
  Backend &backend_;
  Collective *world_;
  MessageSink sink_;
  std::unique_ptr<Trainer> trainer_;
  bool prepared_ = false;
  /// When checkpoints are taken (rank 0's --save-every, --save and
  /// --save-best, which a sharded state's other ranks take part in).
  int64_t saveEvery_ = 0;
  bool saveAtEnd_ = false, saveBest_ = false;
  int64_t batch_ = 0, steps_ = 0;
  EpochPlan epochs_;
  std::optional<Dataset> data_, evalSet_;
  /// The data's batches, one made ahead on a thread (a data file's; not
  /// --synthetic's); destroyed, its thread joined, before data_.
  std::unique_ptr<BatchPrefetcher> prefetch_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<EvalMetrics> metrics_;
  TrainingLog log_, evalLog_;
  TensorBoardWriter tensorboard_;
  SkippedStepLimit skipLimit_;
  /// Whether run() launches a step before reading the last one's results
  /// (runtime/step_lookahead.h; MPC_STEP_LOOKAHEAD, else the backend's
  /// asynchronous steps).
  bool lookahead_ = false;
  /// The checkpoint cadence the lookahead rule reads: rank 0's.
  int64_t lookaheadSaveEvery_ = 0;
  TrainingSummary summary_;
  std::chrono::steady_clock::time_point loopStart_;
  std::atomic<bool> stopRequested_{false};
  static_assert(std::atomic<bool>::is_always_lock_free,
                "requestStop is called from signal handlers");
};

} // namespace mpc
