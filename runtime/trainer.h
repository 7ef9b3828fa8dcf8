// Trainer: runs a compiled model's training step repeatedly on a backend.
//
// The compiled model (mpc-opt's output) carries the step as
// training_info[0].algorithm and the state as main-graph initializers. Each
// step binds a batch, runs the algorithm, then applies update_binding
// (state := new value). Checkpoints are the same model with the state and the
// run's counters (step, data order) written back, so --resume continues
// bit-for-bit.
#pragma once

#include "ir/lr_plateau.h"
#include "kernels/common/lr_schedule_math.h"
#include "passes/inference_model.h"
#include "passes/onnx/onnx_io.h"
#include "runtime/backend.h"
#include "runtime/data/dataset.h"
#include "runtime/executor.h"
#include "runtime/overflow_provenance.h"
#include "runtime/sharded_state.h"
#include "runtime/state_dict.h"

#include <chrono>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>

namespace mpc {

struct StepRecord {
  int64_t step = 0;     ///< 1-based index of the step in the whole run
  double loss = 0;      ///< unscaled fp32 loss, before this step's update
                        ///< (data parallel: the mean of the ranks' losses)
  double lossScale = 1; ///< the scale this step used
  /// The learning rate of this step's update: --lr-schedule's rate for the
  /// step counter, else the optimizer's lr (0: the model brings its own
  /// optimizer, whose rate is its algorithm's business).
  double lr = 0;
  bool skipped = false; ///< gradients overflowed: no parameter changed
  /// With --max-grad-norm: the global 2-norm of the unscaled gradients
  /// before clipping (torch.nn.utils.clip_grad_norm_'s return value; inf or
  /// nan on an overflowed step). --grad-accum: of the window's sums, at its
  /// last micro-batch. nullopt: the step does not clip.
  std::optional<double> gradNorm;
  /// The scale the next step uses (after this step's backoff or growth).
  double nextLossScale = 1;
  double ms = 0; ///< wall time of the step (see Trainer::launchStep)
  /// With Trainer::debugOverflow, on a skipped step: the first node whose
  /// output held an inf/nan (runtime/overflow_provenance.h).
  OverflowReport overflow;
};

class Trainer {
public:
  /// Takes a compiled model (throws Error if it has no training step).
  /// `world`: the data-parallel world this process is a rank of (nullptr:
  /// one rank); not owned, outlives the trainer.
  Trainer(std::unique_ptr<Model> model, Backend &backend,
          Collective *world = nullptr);

  /// The step's data inputs; `batch` is filled with the batch size.
  std::vector<DataInputSpec> dataInputs(int64_t &batch) const;

  using Batch = std::vector<std::pair<std::string, Tensor>>;

  /// Plans the step for (micro-)batches of `batch` samples against `limit`
  /// before any data is made or loaded: throws MemoryLimitError, with the
  /// plan's numbers, when it does not fit (so does a later re-plan).
  /// Returns the planned peak (the arena's bytes).
  size_t checkMemory(int64_t batch, const MemoryLimit &limit);

  /// Runs the compiled step once on this batch and applies the state
  /// updates: one optimizer step, or one micro-batch of a model compiled
  /// with --grad-accum (stepsDone() then counts the K-th only). The batch's
  /// tensors become the step's inputs (moved, not copied: pass a temporary
  /// or std::move to spare a copy of the data).
  StepRecord step(Batch batch);
  /// One optimizer step on microBatches() micro-batches (step() on each, in
  /// order, from the start of an accumulation window): the record's loss is
  /// the mean of their losses, lossScale the scale all of them used, skipped
  /// whether the accumulated gradients overflowed, ms the total, overflow
  /// the first micro-batch's diagnosis (with debugOverflow).
  StepRecord optimizerStep(const std::vector<Batch> &microBatches);
  /// The same, asking `microBatch(j)` for micro-batch j just before it
  /// runs: one micro-batch is held at a time, however large K is.
  StepRecord optimizerStep(const std::function<Batch(int64_t)> &microBatch);
  /// optimizerStep in two halves, so that the host can launch the next
  /// step before this one's results are read (runtime/step_lookahead.h):
  /// launchStep runs the step's micro-batches and applies its updates, and
  /// collectStep returns the record of the oldest step launched. On a
  /// backend with asynchronous steps the fetched values (loss, flags, the
  /// scale) arrive when collected; elsewhere they are read at launch. A
  /// record's ms counts from its launch, or from the last collect when
  /// that came later (a step launched ahead): the run's time per step.
  /// While a step is in flight, checkpoints, exports, a resume and a rate
  /// change throw: they belong between steps (the run loop launches ahead
  /// only where none comes).
  void launchStep(const std::function<Batch(int64_t)> &microBatch);
  StepRecord collectStep();
  /// Optimizer steps launched and not collected.
  size_t pendingSteps() const { return runs_.size() / size_t(microBatches_); }
  /// Micro-batches per optimizer step (mpc.grad_accum; 1 by default).
  int64_t microBatches() const { return microBatches_; }

  /// Data parallel, before the first step: checks that every rank runs the
  /// same step (state names, dtypes and shapes), batch, counters, seed and
  /// order, throwing the same Error on every rank when one does not, then
  /// gives every rank rank 0's state, as DistributedDataParallel does at
  /// construction. Nothing to do in a world of one rank.
  void synchronizeRanks(int64_t batch);

  /// Loads state and counters from a checkpoint written by saveCheckpoint;
  /// refuses one from a different model (state names, dtypes, shapes).
  /// Returns notes for the user: settings the run goes on with that differ
  /// from the checkpoint's without changing its state (the learning rate).
  std::vector<std::string> resumeFrom(const std::string &path);
  /// Writes the model with the current state (atomically); refuses inside
  /// an accumulation window, whose buffers a resume would not continue.
  /// A model compiled with --shard-optimizer writes every sharded state
  /// whole (gathered from the ranks: every rank calls it, and a rank given
  /// an empty path only takes part in the gather), the format an unsharded
  /// run writes.
  void saveCheckpoint(const std::string &path);
  /// Writes the model users deploy: the forward in inference form (batch
  /// norms on their running statistics, no dropout) on the trained
  /// parameters, computing only the chosen outputs from only the inputs
  /// they need (no labels), the batch dimension symbolic
  /// (passes/inference_model.h). Returns the notes on choices the options
  /// left to it (which outputs, a batch that stays fixed).
  std::vector<std::string>
  exportInference(const std::string &path,
                  const InferenceExportOptions &options = {});
  /// Builds the model exportInference would write and drops it: an export
  /// that cannot be made (an output the forward lacks) fails before the
  /// first step, not after the run.
  void checkInferenceExport(const std::string &path,
                            const InferenceExportOptions &options) const;

  /// Writes the trained parameters and buffers (batch-norm statistics) in
  /// the safetensors format under their state_dict names, for
  /// torch's load_state_dict (runtime/state_dict.h); `ema`: the parameters'
  /// moving average (mpc-opt --ema-decay) in their place. Atomic. Returns
  /// the number of tensors written.
  size_t exportSafetensors(const std::string &path, bool ema = false);
  /// The same tensors in memory (runtime/state_dict.h): the trained
  /// parameters and buffers under their state_dict names, copies of the
  /// current state. Throws Error inside an accumulation window.
  std::vector<StateDictEntry> stateDict(bool ema = false);
  /// The learning-rate schedule of the step's updates (mpc-opt
  /// --lr-schedule), and the updates it has counted so far (the step
  /// counter it reads); nullopt without one.
  const std::optional<LrSchedule> &lrSchedule() const { return schedule_; }
  int64_t lrScheduleStep() const;

  /// Optimizer steps launched (all of them collected but those pending).
  int64_t stepsDone() const { return stepsDone_; }
  /// Run counters stored in checkpoints besides the state.
  uint64_t seed = 0;
  bool shuffle = false;
  /// The run's lowest validation loss so far (mpc-run --save-best), kept
  /// in checkpoints so that a resumed run compares with it; NaN: none yet.
  double bestEvalLoss = std::numeric_limits<double>::quiet_NaN();
  /// Validation runs since the best one (mpc-run --early-stop), also kept
  /// in checkpoints.
  int64_t evalsSinceBest = 0;
  /// Whether checkpoints (saveCheckpoint) and exported models keep their
  /// tensors' bytes in PATH.data beside them (mpc-run --external-data):
  /// always, or only when the file would pass 2 GiB (writeModelFile).
  ExternalData externalData = ExternalData::Auto;
  /// On a step that overflows, re-run it (before any state update, so on the
  /// same state and batch) checking every node's output, and fill
  /// StepRecord::overflow.
  bool debugOverflow = false;

  /// Current value of a state tensor (master weights, moments, scale...):
  /// after every launched run, one in flight on a device waited for.
  const Tensor &state(const std::string &name) const;
  /// state(name) whole: a sharded fp32 master (mpc-opt --shard-optimizer)
  /// is this rank's chunk in the step, gathered from every rank here, so
  /// with several ranks every rank calls it for the same names (as
  /// evaluation does).
  Tensor wholeState(const std::string &name) const;
  /// wholeState of each name, the sharded masters among them gathered
  /// together (one collective per runtime/sharded_state.h bucket, not one
  /// per tensor).
  std::vector<Tensor> wholeStates(const std::vector<std::string> &names) const;
  /// Gathers every sharded master into the main graph's whole tensors, which
  /// the exports read: with several ranks, every rank calls it before rank 0
  /// exports. Nothing to do without sharded masters.
  void gatherMasters();
  /// Most bytes live at once in any step so far (the executor's measure,
  /// comparable to MemoryPlan::livePeakBytes).
  size_t peakBytes() const { return peakBytes_; }
  /// The memory the steps needed: the planned arena plus anything the plan
  /// could not place (comparable to MemoryPlan::arenaBytes).
  size_t arenaPeakBytes() const { return arenaPeakBytes_; }
  const Executor &executor() const { return *exec_; }
  /// The loss scale the next step will use (1 without loss scaling); with
  /// steps in flight on a device, the one after the last collected step.
  double lossScale() const;
  /// Whether the step clips its gradients (mpc.grad_norm): StepRecord's
  /// gradNorm is then set.
  bool hasGradNorm() const { return !gradNormName_.empty(); }
  /// Whether the rate changes during the run (--lr-schedule).
  bool hasLrSchedule() const { return schedule_ || plateau_; }
  /// Whether the rate follows the validation loss
  /// (--lr-schedule=reduce_lr_on_plateau): mpc-run calls
  /// reduceLrOnPlateau with every validation loss.
  bool hasLrPlateau() const { return plateau_.has_value(); }
  /// ReduceLROnPlateau's step with `validationLoss`; returns the rate the
  /// next updates use.
  double reduceLrOnPlateau(double validationLoss);
  /// The rate of the next update (StepRecord::lr's).
  double lr() const;
  const Model &model() const { return *model_; }
  /// Whether each rank holds a chunk of the optimizer state (mpc-opt
  /// --shard-optimizer): checkpoints then gather on every rank.
  bool shardsState() const { return sharded_.sharded(); }

private:
  void writeStateBack();
  /// Throws when a step is in flight (its state is not the host's yet).
  void requireNoStepInFlight(const char *what) const;
  /// One run of the step (one micro-batch) launched, not yet collected.
  struct PendingRun {
    StepRecord rec;
    uint64_t seed = 0;
    /// rec.lossScale and rec.lr were read at launch (else at collect, from
    /// the run before it: the values it left are the ones this run used).
    bool scaleKnown = true;
    std::chrono::steady_clock::time_point start;
  };
  /// Launches one run (one micro-batch); on a host-state backend its
  /// results are in the record at once.
  PendingRun &launchRun(Batch batch);
  StepRecord collectRun();
  std::deque<PendingRun> runs_;
  std::chrono::steady_clock::time_point lastCollect_{};

  std::unique_ptr<Model> model_;
  Collective *world_ = nullptr;
  /// --shard-optimizer's state: this rank's chunks (runtime/sharded_state.h).
  ShardedState sharded_;
  std::unique_ptr<Graph> step_; ///< the algorithm plus extra outputs we read
  std::unique_ptr<Executor> exec_;
  std::string lossName_, foundInfName_, lossScaleName_, gradNormName_;
  /// The step's mpc.LearningRate schedule and the step counter it reads
  /// (empty: no schedule, every update uses constantLr_).
  std::optional<LrSchedule> schedule_;
  std::string scheduleStepName_;
  double constantLr_ = 0;
  /// reduce_lr_on_plateau: the rule, its counters, the rate's state.
  std::optional<LrPlateauConfig> plateau_;
  LrPlateauState plateauState_;
  std::string plateauLrName_;
  double plateauLr_ = 0;
  int64_t stepsDone_ = 0;
  /// --grad-accum: K, the micro-batches run in the current window, and the
  /// micro-step counter state (mpc.grad_accum_counter).
  int64_t microBatches_ = 1, microDone_ = 0;
  std::string counterName_;
  size_t peakBytes_ = 0, arenaPeakBytes_ = 0;
};

} // namespace mpc
