// TrainingSession (runtime/training_session.h): mpc-run's training loop and
// its policies as a library.
#include "runtime/training_session.h"

#include "runtime/step_lookahead.h"

#include "ir/step_metadata.h"
#include "passes/optimizer/ema.h"
#include "runtime/memory_limit.h"
#include "support/diagnostics.h"
#include "support/out_of_memory.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

namespace mpc {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

/// A gradient norm to `digits` significant digits; an overflowed step's
/// inf or nan as "inf" and "nan" (printf may write "-nan"), which CSV
/// readers (numpy, pandas, Python's float) take as themselves.
std::string formatGradNorm(double norm, int digits) {
  if (std::isnan(norm))
    return "nan";
  if (std::isinf(norm))
    return norm > 0 ? "inf" : "-inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.*g", digits, norm);
  return text;
}

/// Whether any rank's flag is set (every rank calls it at the same point).
bool onAnyRank(Collective *world, bool flag) {
  if (!world)
    return flag;
  for (uint8_t f : gatherFromRanks(*world, uint8_t(flag)))
    if (f)
      return true;
  return false;
}

} // namespace

TrainingSession::TrainingSession(TrainingOptions options, Backend &backend,
                                 Collective *world, MessageSink sink)
    : TrainingSession(whileAllocating("loading it",
                                      [&] { return loadModel(options.model); }),
                      options, backend, world, std::move(sink)) {}

TrainingSession::TrainingSession(std::unique_ptr<Model> model,
                                 TrainingOptions options, Backend &backend,
                                 Collective *world, MessageSink sink)
    : options_(std::move(options)), backend_(backend), world_(world),
      sink_(std::move(sink)),
      skipLimit_(options_.maxSkippedSteps, options_.minLossScale) {
  const TrainingOptions &o = options_;
  const int ranks = world_ ? world_->size() : 1;
  trainer_ = std::make_unique<Trainer>(std::move(model), backend_, world_);
  Trainer &trainer = *trainer_;
  trainer.externalData =
      o.externalData ? ExternalData::Always : ExternalData::Auto;
  if (ranks > 1 && !hasMeta(trainer.model(), meta::kDataParallel))
    throw Error("compiled without --data-parallel, so its " +
                std::to_string(ranks) +
                " ranks would train apart; compile it with mpc-opt "
                "--data-parallel");
  // The rule steps at the evaluations every --eval-every steps, global
  // steps that a resumed run meets as the straight run did.
  if (trainer.hasLrPlateau() && (o.evalData.empty() || o.evalEvery == 0) &&
      !o.exportOnly)
    throw Error("its learning rate follows the validation loss "
                "(--lr-schedule=reduce_lr_on_plateau): give "
                "--eval-data=FILE.npz and --eval-every=N");
  if (o.exportEma && emaPairs(trainer.model()).empty())
    throw Error("--export-ema: the model keeps no moving average of its "
                "parameters (compile it with mpc-opt --ema-decay=D)");
  if (!o.resume.empty())
    for (const std::string &note : trainer.resumeFrom(o.resume))
      if (lead())
        say(MessageKind::Note, note);
  if (o.seedGiven)
    trainer.seed = o.seed;
  if (o.shuffle)
    trainer.shuffle = true;
}

TrainingSession::~TrainingSession() = default;

void TrainingSession::say(MessageKind kind, const std::string &line) {
  if (sink_)
    sink_(kind, line);
}

void TrainingSession::prepare() {
  if (prepared_)
    return;
  prepared_ = true;
  const TrainingOptions &o = options_;
  Trainer &trainer = *trainer_;
  const int ranks = world_ ? world_->size() : 1;
  std::vector<std::string> dataSources = {o.data};
  dataSources.insert(dataSources.end(), o.moreData.begin(), o.moreData.end());
  const std::string dataName =
      o.synthetic ? "--synthetic" : Dataset::sourcesName(dataSources);
  if (!o.exportInference.empty())
    trainer.checkInferenceExport(o.exportInference, o.exportOptions);

  int64_t batch = o.batch;
  std::vector<DataInputSpec> specs = trainer.dataInputs(batch);
  batch_ = batch;
  trainer.synchronizeRanks(batch);
  // A sharded state's checkpoint is gathered from every rank: each rank
  // saves when rank 0 (the one that writes) does.
  saveEvery_ = o.saveEvery;
  saveAtEnd_ = !o.save.empty();
  saveBest_ = !o.saveBest.empty();
  if (ranks > 1 && trainer.shardsState()) {
    int64_t when[3] = {saveEvery_, saveAtEnd_, saveBest_};
    world_->broadcast(when, sizeof when, 0);
    saveEvery_ = when[0];
    saveAtEnd_ = when[1] != 0;
    saveBest_ = when[2] != 0;
  }
  // The step's memory plan against the device before any data is made or
  // read: a model that cannot fit is refused now, not by the allocator.
  MemoryLimit limit =
      memoryLimitFor(backend_, o.memoryLimitGiven, o.memoryLimit);
  size_t planned = 0;
  try {
    planned = trainer.checkMemory(batch, limit);
  } catch (const MemoryLimitError &e) {
    throw Error(std::string(e.what()) +
                "; try --memory-budget=SIZE at mpc-opt, --grad-accum=K with a "
                "smaller --batch");
  }
  // --synthetic holds 16 batches of samples per rank (whole optimizer steps:
  // at least one, of K micro-batches), each drawn when a batch takes it: one
  // batch at a time is in host memory, which on the CPU it shares with the
  // step's arena, so it counts against the limit.
  const int64_t syntheticBatches =
      std::max<int64_t>(16 / trainer.microBatches(), 1) *
      trainer.microBatches();
  int64_t syntheticSamples = 0;
  if (o.synthetic && __builtin_mul_overflow(batch, syntheticBatches * ranks,
                                            &syntheticSamples))
    throw Error("--synthetic: " + std::to_string(syntheticBatches) +
                " batches of " + std::to_string(batch) +
                " samples are more than 64 bits count");
  const bool onCpu = backend_.name() == "cpu";
  if (o.synthetic && limit.bytes && onCpu) {
    size_t dataBytes = Dataset::syntheticBytes(specs, batch);
    if (dataBytes > limit.bytes - planned)
      throw Error("planned peak " + formatByteSize(planned) +
                  " and a batch of --synthetic samples (" +
                  (dataBytes == SIZE_MAX ? std::string("over 2^64 bytes")
                                         : formatByteSize(dataBytes)) +
                  ") together exceed the memory limit " +
                  formatByteSize(limit.bytes) + " (" + limit.source +
                  "); try a smaller --batch");
  }
  // On the CPU the data shares the host memory with the step's arena: the
  // arrays the step reads may take what the limit leaves after the plan
  // (else, and on a GPU, the memory available), checked before any is read.
  uint64_t dataLimit = 0;
  std::string dataLimitSource;
  if (limit.bytes && onCpu) {
    dataLimit = limit.bytes > planned ? limit.bytes - planned : 1;
    dataLimitSource = "the memory limit " + formatByteSize(limit.bytes) + " (" +
                      limit.source + ") less the planned peak " +
                      formatByteSize(planned);
  }
  // No data set: the caller brings every batch (step(microBatches), the
  // Python binding's Trainer.step), and the run has no epochs.
  if (o.data.empty() && !o.synthetic) {
    steps_ = o.steps;
    finishPrepare();
    return;
  }
  data_.emplace(whileAllocating(
      o.synthetic ? "making the --synthetic data" : "reading " + dataName, [&] {
        return o.synthetic
                   ? Dataset::synthetic(specs, syntheticSamples, trainer.seed)
                   : Dataset::fromSources(dataSources, specs, dataLimit,
                                          dataLimitSource);
      }));
  const Dataset &data = *data_;
  // The ranks slice one global order of the samples: a rank reading
  // another file (another count) would slice another order.
  if (world_) {
    std::vector<int64_t> counts = gatherFromRanks(*world_, data.numSamples());
    for (int r = 1; r < ranks; ++r)
      if (counts[size_t(r)] != counts[0])
        throw Error("rank " + std::to_string(r) + "'s data has " +
                    std::to_string(counts[size_t(r)]) + " samples, rank 0's " +
                    std::to_string(counts[0]) +
                    ": every rank must read the same data");
  }
  // Epochs of whole optimizer steps (drop_last), and the run's length.
  epochs_ = planEpochs(data.numSamples(), batch, trainer.microBatches(), ranks,
                       dataName);
  int64_t steps = o.steps;
  if (o.epochs > 0) {
    int64_t target = 0;
    if (__builtin_mul_overflow(o.epochs, epochs_.stepsPerEpoch, &target))
      throw Error("--epochs=" + std::to_string(o.epochs) + ": " +
                  std::to_string(epochs_.stepsPerEpoch) +
                  " steps each are more than 64 bits count");
    // Epochs in all, as a torch script's range(start_epoch, epochs).
    steps = std::max<int64_t>(target - trainer.stepsDone(), 0);
    if (steps == 0 && lead())
      say(MessageKind::Note,
          "--epochs=" + std::to_string(o.epochs) + " is " +
              std::to_string(target) + " steps, and " +
              (o.resume.empty() ? o.model : o.resume) + " has run " +
              std::to_string(trainer.stepsDone()) + ": nothing to train");
  }
  steps_ = steps;
  // A data file's batches are cut one ahead, beside the step; each rank's
  // next batch is `ranks` on (runtime/run_length.h). --synthetic draws its
  // batch in place (one batch of memory, which the limit above counts).
  if (!o.synthetic) {
    const int64_t perEpoch = epochs_.batchesPerEpoch;
    const bool shuffle = trainer.shuffle;
    const uint64_t seed = trainer.seed;
    prefetch_ = std::make_unique<BatchPrefetcher>(
        [this, batch, perEpoch, shuffle, seed](int64_t index) {
          return whileAllocating(
              "making a batch of " + std::to_string(batch) + " samples", [&] {
                return data_->batch(index, batch, shuffle, seed, perEpoch);
              });
        },
        ranks);
  }
  if (epochs_.leftOut > 0 && lead())
    say(MessageKind::Note,
        dataName + " holds " + std::to_string(data.numSamples()) +
            " samples, " + std::to_string(epochs_.stepsPerEpoch) +
            " steps of " + std::to_string(epochs_.globalBatch) +
            " per epoch; each epoch leaves out " +
            std::to_string(epochs_.leftOut) + " samples (" +
            (trainer.shuffle ? "other ones every epoch: --shuffle"
                             : "the last ones") +
            ")");
  if (const std::optional<LrSchedule> &schedule = trainer.lrSchedule();
      schedule && lead()) {
    std::string warning =
        lrScheduleWarning(*schedule, trainer.lrScheduleStep() + steps);
    if (!warning.empty())
      say(MessageKind::Warning, warning);
  }

  finishPrepare();
}

void TrainingSession::finishPrepare() {
  const TrainingOptions &o = options_;
  Trainer &trainer = *trainer_;
  const int64_t batch = batch_;
  // On by default where the device runs steps asynchronously (the CUDA
  // backend's resident step): the CPU's steps gain nothing from it.
  lookahead_ = stepLookaheadEnabled(std::getenv("MPC_STEP_LOOKAHEAD"),
                                    backend_.asyncSteps() &&
                                        trainer.executor().resident());
  // Every rank must launch ahead at the same steps (their collectives
  // pair up in order): rank 0's switch and checkpoint cadence decide (the
  // other ranks may have no --save-every of their own).
  lookaheadSaveEvery_ = saveEvery_;
  if (world_ && world_->size() > 1) {
    int64_t rule[2] = {lookahead_ ? 1 : 0, saveEvery_};
    world_->broadcast(rule, sizeof rule, 0);
    lookahead_ = rule[0] != 0;
    lookaheadSaveEvery_ = rule[1];
  }
  // The validation set, read (and checked) before the first step.
  // A resumed run's logs go on from its checkpoint's step: rows a killed
  // run logged after it are dropped (runtime/training_log.h).
  std::optional<int64_t> resumedAt;
  if (!o.resume.empty())
    resumedAt = trainer.stepsDone();
  if (o.evalData.empty() && !o.evalMetrics.empty())
    throw Error("--eval-metrics needs --eval-data=FILE.npz");
  std::string columns = "step,eval_loss,samples";
  if (!o.evalData.empty()) {
    // Metrics rank an output beside the loss: the forward keeps them all.
    evaluator_ = std::make_unique<Evaluator>(trainer, backend_, batch,
                                             o.evalEma, !o.evalMetrics.empty());
    if (!o.evalMetrics.empty()) {
      metrics_ = std::make_unique<EvalMetrics>(trainer, *evaluator_, batch,
                                               parseEvalMetrics(o.evalMetrics),
                                               o.evalOutput);
      for (const EvalMetric &m : metrics_->metrics())
        columns += "," + m.name;
    }
    std::vector<std::string> sources = {o.evalData};
    sources.insert(sources.end(), o.moreEvalData.begin(), o.moreEvalData.end());
    evalSet_.emplace(Dataset::fromSources(sources, evaluator_->dataInputs()));
    evaluator_->requireOneBatch(*evalSet_, Dataset::sourcesName(sources));
    // Evaluations run whole batches, as training steps do: say what is
    // left out, as the training data's note says.
    if (const int64_t left = evalSet_->numSamples() % batch; left && lead())
      say(MessageKind::Note,
          Dataset::sourcesName(sources) + " holds " +
              std::to_string(evalSet_->numSamples()) +
              " samples; each evaluation runs " +
              std::to_string(evalSet_->numSamples() / batch) + " batches of " +
              std::to_string(batch) + " and leaves out the last " +
              std::to_string(left));
  }
  // The event file before the logs: a DIR that cannot hold it fails before
  // a log is emptied.
  if (!o.tensorboard.empty() && lead())
    tensorboard_.open(o.tensorboard);
  if (evaluator_ && !o.evalLog.empty())
    evalLog_.open(o.evalLog, "the evaluation log", columns, resumedAt);
  // After --resume, one log for the whole run.
  if (!o.log.empty())
    log_.open(o.log, "the log",
              std::string("step,loss,loss_scale,skipped,ms") +
                  (trainer.hasLrSchedule() ? ",lr" : "") +
                  (trainer.hasGradNorm() ? ",grad_norm" : ""),
              resumedAt);
  loopStart_ = std::chrono::steady_clock::now();
}

void TrainingSession::saveCheckpoint(const std::string &path) {
  // Every checkpoint is preceded by the logs on disk, so that none is ever
  // behind a checkpoint a run resumes from.
  log_.sync();
  evalLog_.sync();
  tensorboard_.sync();
  trainer_->saveCheckpoint(path);
}

EvalResult TrainingSession::evaluate(bool scheduled) {
  prepare();
  const TrainingOptions &o = options_;
  Trainer &trainer = *trainer_;
  if (!evaluator_)
    throw Error("no validation set to evaluate (--eval-data)");
  // `scheduled`: an evaluation of the --eval-every cadence (a global step
  // that is a multiple of it), or the only one of a run without a cadence.
  // Only those are logged and feed the rules that checkpoints carry on
  // (ReduceLROnPlateau, the best loss and --save-best, --early-stop): a
  // resumed run meets exactly the straight run's. The one after a last step
  // off the cadence is reported only.
  EvalResult &lastEval = summary_.lastEval;
  if (metrics_) {
    EvalWithMetrics m =
        metrics_->evaluate(*evaluator_, trainer, *evalSet_, o.evalData, world_);
    lastEval = m.eval;
    summary_.lastMetrics = std::move(m.values);
  } else {
    lastEval = evaluator_->evaluate(trainer, *evalSet_, o.evalData, world_);
  }
  const std::vector<std::pair<std::string, double>> &metrics =
      summary_.lastMetrics;
  summary_.lastEvalStep = trainer.stepsDone();
  char line[128];
  if (evalLog_.isOpen() && scheduled) {
    std::snprintf(line, sizeof line, "%lld,%.9g,%lld",
                  (long long)summary_.lastEvalStep, lastEval.loss,
                  (long long)lastEval.samples);
    std::string row = line;
    for (const auto &[name, value] : metrics) {
      std::snprintf(line, sizeof line, ",%.9g", value);
      row += line;
    }
    evalLog_.row(row);
    evalLog_.flush();
  }
  // TensorBoard plots every evaluation, the one after a last step off the
  // cadence too (a view of the run, which a resumed run does not re-read).
  if (tensorboard_.isOpen()) {
    std::vector<std::pair<std::string, double>> scalars = {
        {"eval/loss", lastEval.loss}};
    for (const auto &[name, value] : metrics)
      scalars.emplace_back("eval/" + name, value);
    tensorboard_.scalars(summary_.lastEvalStep, scalars);
    tensorboard_.flush();
  }
  if (!o.quiet) {
    std::string shown;
    for (const auto &[name, value] : metrics) {
      std::snprintf(line, sizeof line, "  %s %.4f", name.c_str(), value);
      shown += line;
    }
    std::string text = "eval" + std::string(o.evalEma ? " (ema)" : "") +
                       " after step " + std::to_string(summary_.lastEvalStep);
    std::snprintf(line, sizeof line, "  loss %.6f", lastEval.loss);
    say(MessageKind::Progress, text + line + shown + "  (" +
                                   std::to_string(lastEval.samples) +
                                   " samples)");
  }
  if (!scheduled)
    return lastEval;
  // ReduceLROnPlateau's step (every rank alike).
  if (trainer.hasLrPlateau()) {
    double before = trainer.lr();
    double after = trainer.reduceLrOnPlateau(lastEval.loss);
    if (after != before && !o.quiet) {
      std::snprintf(line, sizeof line,
                    "lr %.6g -> %.6g (no lower validation loss)", before,
                    after);
      say(MessageKind::Progress, line);
    }
  }
  // Every rank keeps the best (they evaluate alike); rank 0 writes it.
  if (recordEvalLoss(lastEval.loss, trainer.bestEvalLoss,
                     trainer.evalsSinceBest) &&
      saveBest_) {
    saveCheckpoint(o.saveBest);
    if (!o.quiet)
      say(MessageKind::Progress, "eval: best so far, saved " + o.saveBest);
  }
  return lastEval;
}

std::function<Trainer::Batch(int64_t)> TrainingSession::dataBatches() {
  if (!data_)
    throw Error("no training data to take a batch from (--data or "
                "--synthetic)");
  const int ranks = world_ ? world_->size() : 1;
  const int rank = world_ ? world_->rank() : 0;
  // The order of one process (runtime/run_length.h). An epoch is whole
  // steps, so no step straddles two. Each micro-batch is cut when it runs.
  // The steps launched so far, a step in flight included.
  const int64_t stepsDone = trainer_->stepsDone();
  const int64_t k = trainer_->microBatches();
  return [this, stepsDone, k, ranks, rank](int64_t j) {
    const int64_t index = batchIndexOf(stepsDone, k, j, ranks, rank);
    if (prefetch_)
      return prefetch_->get(index);
    return whileAllocating(
        "making a batch of " + std::to_string(batch_) + " samples", [&] {
          return data_->batch(index, batch_, trainer_->shuffle, trainer_->seed,
                              epochs_.batchesPerEpoch);
        });
  };
}

bool TrainingSession::step() {
  prepare();
  return runStep(dataBatches());
}

bool TrainingSession::step(std::vector<Trainer::Batch> microBatches) {
  prepare();
  if (int64_t(microBatches.size()) != trainer_->microBatches())
    throw Error("a step takes " + std::to_string(trainer_->microBatches()) +
                " micro-batches, got " + std::to_string(microBatches.size()));
  // Each micro-batch is handed over, not copied (its arrays may be the
  // caller's, held in place).
  return runStep([&](int64_t j) { return std::move(microBatches[size_t(j)]); });
}

bool TrainingSession::runStep(
    const std::function<Trainer::Batch(int64_t)> &microBatch) {
  launchStep(microBatch);
  return consumeStep();
}

void TrainingSession::launchStep(
    const std::function<Trainer::Batch(int64_t)> &microBatch) {
  Trainer &trainer = *trainer_;
  // Provenance costs a second run of a skipped step: only when asked, or
  // when the scale is below the floor (a stop may need the diagnosis). A
  // step launched ahead is never one a stop needs (step_lookahead.h).
  trainer.debugOverflow = options_.debugOverflow ||
                          (trainer.pendingSteps() == 0 &&
                           skipLimit_.wantsDiagnosis(trainer.lossScale()));
  trainer.launchStep(microBatch);
}

bool TrainingSession::consumeStep() {
  const TrainingOptions &o = options_;
  Trainer &trainer = *trainer_;
  StepRecord r = trainer.collectStep();
  if (r.skipped && o.debugOverflow)
    say(MessageKind::RankLine, r.overflow.line(r.step));
  bool skipLimitReached =
      skipLimit_.record(r.skipped, r.lossScale, r.nextLossScale);
  TrainingSummary &s = summary_;
  s.skipped += r.skipped;
  s.totalMs += r.ms;
  s.lastLoss = r.loss;
  s.lastGradNorm = r.gradNorm;
  const int64_t done = ++s.steps;
  char line[256];
  if (log_.isOpen()) {
    // ms to 0.1 us: a CPU step of the small models takes about 10 us, and
    // bench/cpu_step.sh's medians must not move in 1 us (10%) quanta.
    int n = std::snprintf(line, sizeof line, "%lld,%.9g,%.9g,%d,%.4f",
                          (long long)r.step, r.loss, r.lossScale,
                          int(r.skipped), r.ms);
    if (trainer.hasLrSchedule()) // the rate to 17 digits: the double's
      n += std::snprintf(line + n, sizeof line - size_t(n), ",%.17g", r.lr);
    if (r.gradNorm) // fp32: 9 digits are all of it
      std::snprintf(line + n, sizeof line - size_t(n), ",%s",
                    formatGradNorm(*r.gradNorm, 9).c_str());
    log_.row(line);
  }
  if (tensorboard_.isOpen()) {
    const int ranks = world_ ? world_->size() : 1;
    const double samples = double(batch_ * trainer.microBatches() * ranks);
    std::vector<std::pair<std::string, double>> scalars = {
        {"train/loss", r.loss},
        {"train/loss_scale", r.lossScale},
        {"train/skipped", r.skipped ? 1.0 : 0.0},
        {"train/samples_per_sec", r.ms > 0 ? samples / (r.ms / 1000) : 0.0}};
    // No rate to plot when the model brings its own optimizer.
    if (trainer.hasLrSchedule() || r.lr != 0)
      scalars.emplace_back("train/lr", r.lr);
    if (r.gradNorm)
      scalars.emplace_back("train/grad_norm", *r.gradNorm);
    tensorboard_.scalars(r.step, scalars);
  }
  const int64_t steps = steps_;
  if (!o.quiet && (done % progressEvery(steps) == 0 || done == steps)) {
    char lr[48] = "", where[96];
    if (trainer.hasLrSchedule())
      std::snprintf(lr, sizeof lr, "  lr %.4g", r.lr);
    std::string gradNorm =
        r.gradNorm ? "  grad_norm " + formatGradNorm(*r.gradNorm, 4) : "";
    // --epochs: the epoch of the step just run and the run's steps in all
    // (a resumed run counts on from its checkpoint).
    if (o.epochs > 0)
      std::snprintf(where, sizeof where, "epoch %lld/%lld  step %lld/%lld",
                    (long long)((r.step - 1) / epochs_.stepsPerEpoch + 1),
                    (long long)o.epochs, (long long)r.step,
                    (long long)(o.epochs * epochs_.stepsPerEpoch));
    else
      std::snprintf(where, sizeof where, "step %lld/%lld", (long long)done,
                    (long long)steps);
    double eta = secondsSince(loopStart_) / double(done) * double(steps - done);
    std::snprintf(line, sizeof line,
                  "%s  loss %.6f  scale %g%s%s  skipped %lld  %.2f ms/step  "
                  "ETA %s",
                  where, r.loss, r.lossScale, lr, gradNorm.c_str(),
                  (long long)s.skipped, s.totalMs / double(done),
                  formatDuration(eta).c_str());
    say(MessageKind::Progress, line);
  }
  bool stoppedEarly = false;
  if (evaluator_ && evalDueAt(r.step, o.evalEvery)) {
    evaluate(/*scheduled=*/true);
    if (earlyStopDue(trainer.evalsSinceBest, o.earlyStop)) {
      if (lead()) {
        std::snprintf(line, sizeof line,
                      "early stop after step %lld: no lower validation loss "
                      "in %lld evaluations (best %.6f)",
                      (long long)trainer.stepsDone(),
                      (long long)trainer.evalsSinceBest, trainer.bestEvalLoss);
        say(MessageKind::Event, line);
      }
      stoppedEarly = true;
    }
  }
  if (saveEvery_ > 0 && done % saveEvery_ == 0)
    saveCheckpoint(o.save);
  if (stoppedEarly)
    return false;
  if (skipLimitReached) {
    log_.close();
    evalLog_.close();
    tensorboard_.close();
    char scale[64], floor[128];
    std::snprintf(scale, sizeof scale, "%g", r.lossScale);
    if (!std::isfinite(r.lossScale))
      std::snprintf(floor, sizeof floor, "%s, not a finite number", scale);
    else if (r.lossScale < o.minLossScale)
      std::snprintf(floor, sizeof floor, "below --min-loss-scale=%g (last %s)",
                    o.minLossScale, scale);
    else
      std::snprintf(floor, sizeof floor,
                    "%s, which the skipped steps did not lower (a static "
                    "scale)",
                    scale);
    std::snprintf(line, sizeof line,
                  ": step %lld: %lld consecutive skipped steps with the loss "
                  "scale %s; ",
                  (long long)r.step, (long long)skipLimit_.inARow(), floor);
    s.failure = o.model + line +
                (trainer.executor().resident() && !r.overflow.found
                     ? "the device-resident step does not trace overflows "
                       "(re-run with --debug-overflow)"
                     : r.overflow.line(r.step));
    return false;
  }
  return true;
}

TrainingSummary TrainingSession::run() {
  prepare();
  const TrainingOptions &o = options_;
  Trainer &trainer = *trainer_;
  bool stopped = false; // a rank was asked to stop (all ranks agree)
  loopStart_ = std::chrono::steady_clock::now();
  // Step i+1 may be launched before step i's results are read (the
  // device keeps working while the host logs): runtime/step_lookahead.h
  // says where. A stop request is asked of every rank before each launch,
  // ahead or not, so a stop ends the run after the step before it.
  bool launched = false; // step i is in flight already
  for (int64_t i = 0; i < steps_; ++i) {
    if (!launched) {
      if (onAnyRank(world_, stopRequested())) {
        stopped = true;
        break;
      }
      launchStep(dataBatches());
    }
    launched = false;
    LookaheadQuery q;
    q.enabled = lookahead_;
    q.done = i + 1;
    q.steps = steps_;
    q.globalStep = trainer.stepsDone();
    q.evaluates = evaluator_ != nullptr;
    q.evalEvery = o.evalEvery;
    q.saveEvery = lookaheadSaveEvery_;
    q.debugOverflow = o.debugOverflow;
    q.skipLimit = o.maxSkippedSteps;
    q.skippedInARow = skipLimit_.inARow();
    std::exception_ptr aheadFailed;
    if (mayLaunchAhead(q)) {
      if (onAnyRank(world_, stopRequested()))
        stopped = true;
      else {
        try {
          launchStep(dataBatches());
          launched = true;
        } catch (...) {
          // A synchronous run logs step i before step i+1 fails (a bad
          // batch, a label out of range): so does this one. The other
          // ranks of a world are in step i+1's collectives by now, so a
          // rank of one does not wait to tell them.
          if (world_ && world_->size() > 1)
            throw;
          aheadFailed = std::current_exception();
        }
      }
    }
    const bool going = consumeStep();
    if (aheadFailed)
      std::rethrow_exception(aheadFailed);
    if (!going) {
      if (launched) // the rule launches ahead only where no stop can come
        throw Error("internal error: the run ended with a step in flight");
      break;
    }
    if (stopped)
      break;
  }
  if (!summary_.failure.empty())
    return summary_;
  log_.flush();
  tensorboard_.flush();
  summary_.trainSeconds = secondsSince(loopStart_);
  // The final evaluation, unless the last step had one or a stop was
  // requested (every rank agrees on both).
  if (evaluator_ && !stopped && summary_.lastEvalStep != trainer.stepsDone())
    evaluate(/*scheduled=*/o.evalEvery == 0);
  summary_.stopRequested = stopRequested();
  if (summary_.stopRequested && lead())
    say(MessageKind::Event,
        "interrupted after step " + std::to_string(trainer.stepsDone()) +
            (o.save.empty() ? "" : ", saving the checkpoint"));
  if (saveAtEnd_)
    saveCheckpoint(o.save);
  log_.close();
  evalLog_.close();
  tensorboard_.close();
  writeExports();
  return summary_;
}

std::vector<std::string> TrainingSession::writeExports() {
  const TrainingOptions &o = options_;
  Trainer &trainer = *trainer_;
  std::vector<std::string> written;
  const char *ema = o.exportEma ? " (moving average)" : "";
  // Sharded masters are gathered on every rank, exporting or not: only
  // rank 0 exports, from the main graph's whole weights.
  if (world_ && world_->size() > 1)
    trainer.gatherMasters();
  if (!o.exportInference.empty()) {
    std::vector<std::string> notes =
        trainer.exportInference(o.exportInference, o.exportOptions);
    if (!o.quiet)
      for (const std::string &note : notes)
        say(MessageKind::Note, note);
    written.push_back(std::string("exported the inference model") + ema +
                      " after step " + std::to_string(trainer.stepsDone()) +
                      ": " + o.exportInference);
  }
  if (!o.exportSafetensors.empty()) {
    size_t n = trainer.exportSafetensors(o.exportSafetensors, o.exportEma);
    written.push_back("exported " + std::to_string(n) + " tensors" + ema +
                      " after step " + std::to_string(trainer.stepsDone()) +
                      ": " + o.exportSafetensors);
  }
  return written;
}

} // namespace mpc
