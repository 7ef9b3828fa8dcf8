// mpc-run: trains a compiled model (mpc-opt's output) on the CPU or GPU, or
// runs any supported model forward (--infer).
//
// A thin main: flags, data, the Trainer loop, progress, log CSV, summary,
// checkpoints; for --infer, input files in and one .npy per output out
// (runtime/inference.h). Bad input (flags, data, checkpoints, input files) is
// one line and exit 1.
#include "passes/ema.h"
#include "passes/onnx/onnx_io.h"
#include "passes/support/diagnostics.h"
#include "passes/support/out_of_memory.h"
#include "passes/support/regular_input.h"
#include "runtime/cuda/plugin_loader.h"
#include "runtime/evaluator.h"
#include "runtime/inference.h"
#include "runtime/memory_limit.h"
#include "runtime/run_length.h"
#include "runtime/trainer.h"
#include "runtime/training_log.h"
#include "runtime/world/launched_world.h"
#include "tools/mpc-run/local_launcher.h"
#include "tools/mpc-run/run_files.h"
#include "tools/mpc-run/run_flags.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

using namespace mpc;

namespace {

using Flags = RunFlags;

std::string formatBytes(size_t bytes) {
  char buf[64];
  if (bytes >= (size_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024);
  return buf;
}

/// The device asked for: --device, else $MPC_DEVICE, else auto.
std::string resolveDevice(std::string device) {
  if (device.empty()) {
    const char *env = std::getenv("MPC_DEVICE");
    device = env && *env ? env : "auto";
    if (device != "cpu" && device != "cuda" && device != "auto")
      throw Error("MPC_DEVICE: expected cpu, cuda or auto, got '" + device +
                  "'");
  }
  return device;
}

/// The backend the device names; auto is cuda when this build has the CUDA
/// backend and a usable GPU is there (what a user of a GPU machine
/// expects), else cpu; cuda that cannot be had is an error saying why (no
/// CUDA in this build, no driver, no device, no loadable plugin). cpu never
/// loads the CUDA backend's plugin (runtime/cuda/plugin_loader.h).
std::unique_ptr<Backend> makeBackend(const std::string &device,
                                     const CudaBackendOptions &options = {}) {
  if (device == "cpu")
    return createCpuBackend();
  CudaBackendAttempt cuda = loadCudaBackend(options);
  if (cuda.backend)
    return std::move(cuda.backend);
  if (device == "cuda")
    throw Error("--device=cuda: " + cuda.whyNot + " (use --device=cpu)");
  // auto: the CPU, silently where there is no usable GPU; a GPU whose
  // plugin is missing or broken is an installation problem to point out.
  if (cuda.pluginProblem)
    std::fprintf(stderr,
                 "mpc-run: note: --device=auto: %s; running on the cpu\n",
                 cuda.whyNot.c_str());
  return createCpuBackend();
}

/// --infer: reads the input files, runs the main graph, writes the outputs.
int runInfer(const Flags &f) {
  // One forward pass: the staged cuda backend (per-node copies cost little
  // here, and inference graphs often compute shapes from data, which the
  // device-resident step refuses).
  CudaBackendOptions staged;
  staged.resident = false;
  std::unique_ptr<Backend> backend = makeBackend(f.device, staged);
  // Fail on a bad output directory, or a model that is a FIFO or a device
  // (it would be waited on or read without end), before any work is done;
  // the directory is made only when the outputs are written.
  checkOutputDir(f.outputDir);
  requireRegularFile(f.model, "");
  std::vector<FileRole> read = {{"the model", f.model}};
  std::vector<InferenceInput> inputs;
  for (const std::string &spec : f.inputs) {
    InferenceInput in;
    size_t eq = spec.find('=');
    in.source = spec;
    if (eq != std::string::npos) {
      in.name = spec.substr(0, eq);
      in.source = spec.substr(eq + 1);
    }
    if (in.source.empty())
      throw Error("--input " + spec + ": expects a file (NAME=FILE or FILE)");
    in.value = readTensorFile(in.source);
    read.push_back({"--input", in.source});
    inputs.push_back(std::move(in));
  }
  std::unique_ptr<Model> model =
      whileAllocating("loading it", [&] { return loadModel(f.model); });
  std::vector<InferenceOutput> outputs =
      runInference(*model, std::move(inputs), *backend);
  std::vector<std::string> paths =
      writeInferenceOutputs(f.outputDir, outputs, read);
  if (!f.quiet)
    for (size_t i = 0; i < outputs.size(); ++i)
      std::printf("output '%s' %s[%s] -> %s\n", outputs[i].name.c_str(),
                  dtypeName(outputs[i].value.dtype),
                  dimsToString(outputs[i].value.dims).c_str(),
                  paths[i].c_str());
  return 0;
}

/// The data-parallel world of a multi-rank launch (nullptr: one rank); the
/// error path aborts it so that no rank waits for one that failed.
std::unique_ptr<Collective> gWorld;

/// "rank R: " in a multi-rank launch, where lines of several ranks mix.
std::string rankPrefix() {
  return gWorld ? "rank " + std::to_string(gWorld->rank()) + ": " : "";
}

/// Prints the error line (one write: the ranks' lines must not interleave)
/// and returns exit code 1; in a multi-rank launch every rank ends, so that
/// none waits in a collective for this one.
int failed(const std::string &msg) {
  std::string line = "mpc-run: " + rankPrefix() + msg + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  if (gWorld)
    gWorld->abort(1);
  return 1;
}

/// Whether any rank's flag is set (every rank calls it at the same point).
bool onAnyRank(bool flag) {
  if (!gWorld)
    return flag;
  for (uint8_t f : gatherFromRanks(*gWorld, uint8_t(flag)))
    if (f)
      return true;
  return false;
}

/// Set by SIGINT/SIGTERM: the loop finishes the current step, saves the
/// checkpoint (with --save) and exits cleanly instead of losing the run.
volatile std::sig_atomic_t gStopRequested = 0;

void requestStop(int) { gStopRequested = 1; }

/// What --export-inference, --outputs, --precision and --export-ema ask for.
InferenceExportOptions inferenceExportOptions(const Flags &f) {
  InferenceExportOptions options;
  options.outputs = f.exportOutputs;
  if (f.exportPrecision)
    options.precision = *f.exportPrecision;
  options.ema = f.exportEma;
  return options;
}

/// --export-inference and --export-safetensors from the trainer's state;
/// `report`: a line on stdout for each file written.
void writeExports(Trainer &trainer, const Flags &f, bool report) {
  if (!f.exportInference.empty()) {
    InferenceExportOptions options = inferenceExportOptions(f);
    std::vector<std::string> notes =
        trainer.exportInference(f.exportInference, options);
    if (!f.quiet)
      for (const std::string &note : notes)
        std::fprintf(stderr, "mpc-run: note: %s\n", note.c_str());
    if (report)
      std::printf("exported the inference model%s after step %lld: %s\n",
                  f.exportEma ? " (moving average)" : "",
                  (long long)trainer.stepsDone(), f.exportInference.c_str());
  }
  if (!f.exportSafetensors.empty()) {
    size_t n = trainer.exportSafetensors(f.exportSafetensors, f.exportEma);
    if (report)
      std::printf("exported %zu tensors%s after step %lld: %s\n", n,
                  f.exportEma ? " (moving average)" : "",
                  (long long)trainer.stepsDone(), f.exportSafetensors.c_str());
  }
}

int run(Flags f) {
  gWorld = joinLaunchedWorld(f.collectiveTimeout);
  // Before any file is read or written: no input that would hang the run,
  // no output over an input or over another output.
  checkRunFiles(f);
  const int ranks = gWorld ? gWorld->size() : 1;
  const int rank = gWorld ? gWorld->rank() : 0;
  const bool lead = rank == 0; // prints, logs and writes files
  if (!lead) {
    f.quiet = true;
    f.log.clear();
    f.save.clear();
    f.saveEvery = 0;
    f.exportInference.clear();
    f.exportSafetensors.clear();
    f.evalLog.clear();
    f.saveBest.clear();
  }
  CudaBackendOptions cuda;
  // The overflow diagnosis re-runs a step on the state before it, node by
  // node on the host: the staged backend.
  cuda.resident = f.cudaResident && !f.debugOverflow;
  cuda.graphs = f.cudaGraphs;
  // One GPU per rank of a machine, as torchrun's LOCAL_RANK.
  if (ranks > 1)
    cuda.device = launchedLocalRank();
  // Exports alone run nothing: the CPU backend holds the state.
  std::unique_ptr<Backend> backend =
      f.exportOnly ? createCpuBackend() : makeBackend(f.device, cuda);
  const bool onCuda = backend->name() == "cuda";
  // The ranks' reductions must meet in one transport: NCCL on cuda, MPI on
  // the cpu (auto could give a rank without a GPU the cpu).
  if (gWorld)
    for (uint8_t cudaRank : gatherFromRanks(*gWorld, uint8_t(onCuda)))
      if (bool(cudaRank) != onCuda)
        throw Error(
            "some ranks run on cuda and others on the cpu (each rank "
            "takes the GPU of its local rank); give every rank a GPU or "
            "pass --device=cpu");
  if (onCuda && f.cudaResident && f.debugOverflow && !f.quiet)
    std::fprintf(stderr, "mpc-run: --debug-overflow: the cuda backend runs "
                         "the step staged (node by node)\n");
  Trainer trainer(
      whileAllocating("loading it", [&] { return loadModel(f.model); }),
      *backend, gWorld.get());
  trainer.externalData =
      f.externalData ? ExternalData::Always : ExternalData::Auto;
  if (ranks > 1 && !trainer.model().meta("mpc.data_parallel"))
    throw Error("compiled without --data-parallel, so its " +
                std::to_string(ranks) +
                " ranks would train apart; compile it with mpc-opt "
                "--data-parallel");
  // The rule steps at the evaluations every --eval-every steps, global
  // steps that a resumed run meets as the straight run did.
  if (trainer.hasLrPlateau() && (f.evalData.empty() || f.evalEvery == 0) &&
      !f.exportOnly)
    throw Error("its learning rate follows the validation loss "
                "(--lr-schedule=reduce_lr_on_plateau): give "
                "--eval-data=FILE.npz and --eval-every=N");
  if (f.exportEma && emaPairs(trainer.model()).empty())
    throw Error("--export-ema: the model keeps no moving average of its "
                "parameters (compile it with mpc-opt --ema-decay=D)");
  if (!f.resume.empty())
    trainer.resumeFrom(f.resume);
  if (f.seedGiven)
    trainer.seed = f.seed;
  if (f.shuffle)
    trainer.shuffle = true;
  if (f.exportOnly) {
    // --save without training writes the model (resumed) as a checkpoint,
    // e.g. again with --external-data, rather than being ignored.
    if (!f.save.empty() && lead)
      trainer.saveCheckpoint(f.save);
    writeExports(trainer, f, /*report=*/lead);
    return 0;
  }
  if (!f.exportInference.empty())
    trainer.checkInferenceExport(f.exportInference, inferenceExportOptions(f));

  int64_t batch = f.batch;
  std::vector<DataInputSpec> specs = trainer.dataInputs(batch);
  trainer.synchronizeRanks(batch);
  // The step's memory plan against the device before any data is made or
  // read: a model that cannot fit is refused now, not by the allocator.
  MemoryLimit limit =
      memoryLimitFor(*backend, f.memoryLimitGiven, f.memoryLimit);
  size_t planned = 0;
  try {
    planned = trainer.checkMemory(batch, limit);
  } catch (const MemoryLimitError &e) {
    throw Error(std::string(e.what()) +
                "; try --recompute=auto at mpc-opt, --grad-accum=K with a "
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
  if (f.synthetic && __builtin_mul_overflow(batch, syntheticBatches * ranks,
                                            &syntheticSamples))
    throw Error("--synthetic: " + std::to_string(syntheticBatches) +
                " batches of " + std::to_string(batch) +
                " samples are more than 64 bits count");
  if (f.synthetic && limit.bytes && backend->name() == "cpu") {
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
  if (limit.bytes && backend->name() == "cpu") {
    dataLimit = limit.bytes > planned ? limit.bytes - planned : 1;
    dataLimitSource = "the memory limit " + formatByteSize(limit.bytes) + " (" +
                      limit.source + ") less the planned peak " +
                      formatByteSize(planned);
  }
  Dataset data = whileAllocating(
      f.synthetic ? "making the --synthetic data" : "reading " + f.data, [&] {
        return f.synthetic
                   ? Dataset::synthetic(specs, syntheticSamples, trainer.seed)
                   : Dataset::fromNpz(f.data, specs, dataLimit,
                                      dataLimitSource);
      });
  // The ranks slice one global order of the samples: a rank reading
  // another file (another count) would slice another order.
  if (gWorld) {
    std::vector<int64_t> counts = gatherFromRanks(*gWorld, data.numSamples());
    for (int r = 1; r < ranks; ++r)
      if (counts[size_t(r)] != counts[0])
        throw Error("rank " + std::to_string(r) + "'s data has " +
                    std::to_string(counts[size_t(r)]) + " samples, rank 0's " +
                    std::to_string(counts[0]) +
                    ": every rank must read the same data");
  }
  // Epochs of whole optimizer steps (drop_last), and the run's length.
  const EpochPlan epochs =
      planEpochs(data.numSamples(), batch, trainer.microBatches(), ranks,
                 f.synthetic ? "--synthetic" : f.data);
  int64_t steps = f.steps;
  if (f.epochs > 0) {
    int64_t target = 0;
    if (__builtin_mul_overflow(f.epochs, epochs.stepsPerEpoch, &target))
      throw Error("--epochs=" + std::to_string(f.epochs) + ": " +
                  std::to_string(epochs.stepsPerEpoch) +
                  " steps each are more than 64 bits count");
    // Epochs in all, as a torch script's range(start_epoch, epochs).
    steps = std::max<int64_t>(target - trainer.stepsDone(), 0);
    if (steps == 0 && lead)
      std::fprintf(stderr,
                   "mpc-run: note: --epochs=%lld is %lld steps, and %s has "
                   "run %lld: nothing to train\n",
                   (long long)f.epochs, (long long)target,
                   f.resume.empty() ? f.model.c_str() : f.resume.c_str(),
                   (long long)trainer.stepsDone());
  }
  if (epochs.leftOut > 0 && lead)
    std::fprintf(stderr,
                 "mpc-run: note: %s holds %lld samples, %lld steps of %lld "
                 "per epoch; each epoch leaves out %lld samples (%s)\n",
                 f.synthetic ? "--synthetic" : f.data.c_str(),
                 (long long)data.numSamples(), (long long)epochs.stepsPerEpoch,
                 (long long)epochs.globalBatch, (long long)epochs.leftOut,
                 trainer.shuffle ? "other ones every epoch: --shuffle"
                                 : "the last ones");
  if (const std::optional<LrSchedule> &schedule = trainer.lrSchedule();
      schedule && lead) {
    std::string warning =
        lrScheduleWarning(*schedule, trainer.lrScheduleStep() + steps);
    if (!warning.empty())
      std::fprintf(stderr, "mpc-run: warning: %s\n", warning.c_str());
  }

  // The validation set, read (and checked) before the first step.
  std::unique_ptr<Evaluator> evaluator;
  std::optional<Dataset> evalSet;
  // A resumed run's logs go on from its checkpoint's step: rows a killed
  // run logged after it are dropped (runtime/training_log.h).
  std::optional<int64_t> resumedAt;
  if (!f.resume.empty())
    resumedAt = trainer.stepsDone();
  TrainingLog evalLog, log;
  if (!f.evalData.empty()) {
    evaluator =
        std::make_unique<Evaluator>(trainer, *backend, batch, f.evalEma);
    evalSet.emplace(Dataset::fromNpz(f.evalData, evaluator->dataInputs()));
    evaluator->requireOneBatch(*evalSet, f.evalData);
    if (!f.evalLog.empty())
      evalLog.open(f.evalLog, "the evaluation log", "step,eval_loss,samples",
                   resumedAt);
  }
  // Every checkpoint is preceded by the logs on disk, so that none is ever
  // behind a checkpoint a run resumes from.
  auto saveCheckpoint = [&](const std::string &path) {
    log.sync();
    evalLog.sync();
    trainer.saveCheckpoint(path);
  };
  EvalResult lastEval;
  int64_t lastEvalStep = -1;
  // `scheduled`: an evaluation of the --eval-every cadence (a global step
  // that is a multiple of it), or the only one of a run without a cadence.
  // Only those are logged and feed the rules that checkpoints carry on
  // (ReduceLROnPlateau, the best loss and --save-best, --early-stop): a
  // resumed run meets exactly the straight run's. The one after a last step
  // off the cadence is reported only.
  auto evaluate = [&](bool scheduled) {
    lastEval = evaluator->evaluate(trainer, *evalSet, f.evalData, gWorld.get());
    lastEvalStep = trainer.stepsDone();
    if (evalLog.isOpen() && scheduled) {
      char line[96];
      std::snprintf(line, sizeof line, "%lld,%.9g,%lld",
                    (long long)lastEvalStep, lastEval.loss,
                    (long long)lastEval.samples);
      evalLog.row(line);
      evalLog.flush();
    }
    if (!f.quiet)
      std::fprintf(stderr,
                   "eval%s after step %lld  loss %.6f  (%lld samples)\n",
                   f.evalEma ? " (ema)" : "", (long long)lastEvalStep,
                   lastEval.loss, (long long)lastEval.samples);
    if (!scheduled)
      return;
    // ReduceLROnPlateau's step (every rank alike).
    if (trainer.hasLrPlateau()) {
      double before = trainer.lr();
      double after = trainer.reduceLrOnPlateau(lastEval.loss);
      if (after != before && !f.quiet)
        std::fprintf(stderr, "lr %.6g -> %.6g (no lower validation loss)\n",
                     before, after);
    }
    // Every rank keeps the best (they evaluate alike); rank 0 writes it. A
    // NaN loss is never the best.
    if (std::isnan(lastEval.loss) || lastEval.loss >= trainer.bestEvalLoss) {
      ++trainer.evalsSinceBest;
      return;
    }
    trainer.bestEvalLoss = lastEval.loss;
    trainer.evalsSinceBest = 0;
    if (!f.saveBest.empty()) {
      saveCheckpoint(f.saveBest);
      if (!f.quiet)
        std::fprintf(stderr, "eval: best so far, saved %s\n",
                     f.saveBest.c_str());
    }
  };

  // After --resume, one log for the whole run.
  if (!f.log.empty())
    log.open(f.log, "the log",
             std::string("step,loss,loss_scale,skipped,ms") +
                 (trainer.hasLrSchedule() ? ",lr" : ""),
             resumedAt);

  std::signal(SIGINT, requestStop);
  std::signal(SIGTERM, requestStop);
  // --max-skipped-steps counts the skipped steps in a row that cannot
  // recover: the scale is below the floor, or a skip did not lower it (a
  // static scale, or NaN or inf, which backoff leaves as they are), so
  // every step to come overflows as this one did.
  int64_t skipped = 0, done = 0, skippedBelowFloor = 0;
  auto belowFloor = [&](double scale) {
    return !(scale >= f.minLossScale) || !std::isfinite(scale);
  };
  double totalMs = 0, lastLoss = 0;
  int64_t every = steps >= 10 ? steps / 10 : 1;
  bool stopped = false;      // a rank was asked to stop (all ranks agree)
  bool stoppedEarly = false; // --early-stop (all ranks agree)
  const auto loopStart = std::chrono::steady_clock::now();
  auto secondsSince = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
        .count();
  };
  for (int64_t i = 0; i < steps; ++i) {
    if (onAnyRank(gStopRequested)) {
      stopped = true;
      break;
    }
    // Micro-batch j of optimizer step s is batch s*K + j: the same samples,
    // in the same order, as batch s of size K*B. Data parallel, rank r
    // takes the r-th B samples of each global micro-batch of N*B. An epoch
    // is whole steps, so no step straddles two. Each is cut when it runs.
    const int64_t firstMicroBatch =
        trainer.stepsDone() * trainer.microBatches();
    auto microBatch = [&](int64_t j) {
      return whileAllocating(
          "making a batch of " + std::to_string(batch) + " samples", [&] {
            return data.batch((firstMicroBatch + j) * ranks + rank, batch,
                              trainer.shuffle, trainer.seed,
                              epochs.batchesPerEpoch);
          });
    };
    // Provenance costs a second run of a skipped step: only when asked, or
    // when the scale is below the floor (a stop may need the diagnosis).
    trainer.debugOverflow =
        f.debugOverflow ||
        (f.maxSkippedSteps > 0 &&
         (belowFloor(trainer.lossScale()) || skippedBelowFloor > 0));
    StepRecord r = trainer.optimizerStep(microBatch);
    if (r.skipped && f.debugOverflow)
      std::fprintf(stderr, "mpc-run: %s%s\n", rankPrefix().c_str(),
                   r.overflow.line(r.step).c_str());
    bool stuck =
        belowFloor(r.lossScale) || !(trainer.lossScale() < r.lossScale);
    skippedBelowFloor = r.skipped && stuck ? skippedBelowFloor + 1 : 0;
    skipped += r.skipped;
    totalMs += r.ms;
    lastLoss = r.loss;
    ++done;
    if (log.isOpen()) {
      // ms to 0.1 us: a CPU step of the small models takes about 10 us, and
      // bench/cpu_step.sh's medians must not move in 1 us (10%) quanta.
      char line[192];
      int n = std::snprintf(line, sizeof line, "%lld,%.9g,%.9g,%d,%.4f",
                            (long long)r.step, r.loss, r.lossScale,
                            int(r.skipped), r.ms);
      if (trainer.hasLrSchedule()) // the rate to 17 digits: the double's
        std::snprintf(line + n, sizeof line - size_t(n), ",%.17g", r.lr);
      log.row(line);
    }
    if (!f.quiet && ((i + 1) % every == 0 || i + 1 == steps)) {
      char lr[48] = "", where[96];
      if (trainer.hasLrSchedule())
        std::snprintf(lr, sizeof lr, "  lr %.4g", r.lr);
      // --epochs: the epoch of the step just run and the run's steps in all
      // (a resumed run counts on from its checkpoint).
      if (f.epochs > 0)
        std::snprintf(
            where, sizeof where, "epoch %lld/%lld  step %lld/%lld",
            (long long)((trainer.stepsDone() - 1) / epochs.stepsPerEpoch + 1),
            (long long)f.epochs, (long long)trainer.stepsDone(),
            (long long)(f.epochs * epochs.stepsPerEpoch));
      else
        std::snprintf(where, sizeof where, "step %lld/%lld", (long long)(i + 1),
                      (long long)steps);
      double eta =
          secondsSince(loopStart) / double(i + 1) * double(steps - (i + 1));
      std::fprintf(stderr,
                   "%s  loss %.6f  scale %g%s  skipped %lld  %.2f ms/step  "
                   "ETA %s\n",
                   where, r.loss, r.lossScale, lr, (long long)skipped,
                   totalMs / double(i + 1), formatDuration(eta).c_str());
    }
    if (evaluator && f.evalEvery > 0 &&
        trainer.stepsDone() % f.evalEvery == 0) {
      evaluate(/*scheduled=*/true);
      if (f.earlyStop > 0 && trainer.evalsSinceBest >= f.earlyStop) {
        if (lead)
          std::fprintf(stderr,
                       "mpc-run: early stop after step %lld: no lower "
                       "validation loss in %lld evaluations (best %.6f)\n",
                       (long long)trainer.stepsDone(),
                       (long long)trainer.evalsSinceBest, trainer.bestEvalLoss);
        stoppedEarly = true;
      }
    }
    if (f.saveEvery > 0 && (i + 1) % f.saveEvery == 0)
      saveCheckpoint(f.save);
    if (stoppedEarly)
      break;
    if (f.maxSkippedSteps > 0 && skippedBelowFloor >= f.maxSkippedSteps) {
      log.close();
      evalLog.close();
      char scale[64], floor[128];
      std::snprintf(scale, sizeof scale, "%g", r.lossScale);
      if (!std::isfinite(r.lossScale))
        std::snprintf(floor, sizeof floor, "%s, not a finite number", scale);
      else if (r.lossScale < f.minLossScale)
        std::snprintf(floor, sizeof floor,
                      "below --min-loss-scale=%g (last %s)", f.minLossScale,
                      scale);
      else
        std::snprintf(floor, sizeof floor,
                      "%s, which the skipped steps did not lower (a static "
                      "scale)",
                      scale);
      std::fprintf(stderr,
                   "mpc-run: %s%s: step %lld: %lld consecutive skipped steps "
                   "with the loss scale %s; %s\n",
                   rankPrefix().c_str(), f.model.c_str(), (long long)r.step,
                   (long long)skippedBelowFloor, floor,
                   trainer.executor().resident() && !r.overflow.found
                       ? "the device-resident step does not trace overflows "
                         "(re-run with --debug-overflow)"
                       : r.overflow.line(r.step).c_str());
      return 1;
    }
  }
  log.flush();
  const double trainSeconds = secondsSince(loopStart);
  // The final evaluation, unless the last step had one or Ctrl-C asked to
  // stop (every rank agrees on both).
  if (evaluator && !stopped && lastEvalStep != trainer.stepsDone())
    evaluate(/*scheduled=*/f.evalEvery == 0);
  if (gStopRequested && lead)
    std::fprintf(stderr, "mpc-run: interrupted after step %lld%s\n",
                 (long long)trainer.stepsDone(),
                 f.save.empty() ? "" : ", saving the checkpoint");
  if (!f.save.empty())
    saveCheckpoint(f.save);
  log.close();
  evalLog.close();
  writeExports(trainer, f, /*report=*/false);

  double samplesPerSec =
      totalMs > 0 ? double(done * batch * trainer.microBatches() * ranks) /
                        (totalMs / 1000.0)
                  : 0;
  if (!lead)
    return gStopRequested ? 130 : 0;
  if (ranks > 1)
    std::printf("data parallel: %d ranks of %lld samples per step\n", ranks,
                (long long)(batch * trainer.microBatches()));
  if (lastEvalStep >= 0)
    std::printf("eval%s: loss %.6f after step %lld (%lld samples of %s)\n",
                f.evalEma ? " (ema)" : "", lastEval.loss,
                (long long)lastEvalStep, (long long)lastEval.samples,
                f.evalData.c_str());
  if (f.epochs > 0)
    std::printf("epochs: %lld of %lld in all, %lld steps of %lld samples "
                "each\n",
                (long long)(trainer.stepsDone() / epochs.stepsPerEpoch),
                (long long)f.epochs, (long long)epochs.stepsPerEpoch,
                (long long)epochs.globalBatch);
  std::printf("summary: steps %lld  skipped %lld  final loss %.6f  loss scale "
              "%g  %.0f samples/s  peak memory %s (%s; %zu bytes, live "
              "%zu)  time %s\n",
              (long long)done, (long long)skipped, lastLoss,
              trainer.lossScale(), samplesPerSec,
              formatBytes(trainer.arenaPeakBytes()).c_str(),
              backend->name().c_str(), trainer.arenaPeakBytes(),
              trainer.peakBytes(), formatDuration(trainSeconds).c_str());
  if (onCuda && !f.quiet) {
    CudaMemoryStats s = loadedCudaMemoryStats(*backend);
    std::fprintf(stderr,
                 "cuda: %s step, %zu device allocations, %zu graph captures, "
                 "%zu graph replays\n",
                 trainer.executor().resident() ? "device-resident" : "staged",
                 s.deviceAllocations, s.graphCaptures, s.graphLaunches);
  }
  return gStopRequested ? 130 : 0;
}

} // namespace

int main(int argc, char **argv) {
  Flags flags;
  try {
    flags = parseRunFlags(argc, argv);
    if (flags.help) {
      std::cout << runUsage();
      return 0;
    }
    if (flags.nprocPerNode > 1) {
      if (launchedWorldSize() > 1)
        throw LaunchError("--nproc-per-node starts the ranks itself, but "
                          "this process is one of " +
                          std::to_string(launchedWorldSize()) +
                          " ranks a launcher started");
      // Every argument but --nproc-per-node goes to the ranks.
      std::vector<std::string> args;
      for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]).rfind("--nproc-per-node=", 0) != 0)
          args.push_back(argv[i]);
      return launchLocalRanks(int(flags.nprocPerNode), args);
    }
    flags.device = resolveDevice(flags.device);
    if (flags.infer && launchedWorldSize() > 1)
      throw Error("--infer runs as one process, not as one of " +
                  std::to_string(launchedWorldSize()) + " launched ranks");
    int rc = flags.infer ? runInfer(flags) : run(flags);
    gWorld.reset(); // finalises MPI
    return rc;
  } catch (const LaunchError &e) {
    return failed(e.what()); // about the launch, not the model
  } catch (const Error &e) {
    std::string msg = e.what();
    // Messages about an input file or the output directory already start
    // with that path; they are not about the model.
    auto startsWithPath = [&](const std::string &path) {
      return !path.empty() && msg.rfind(path + ":", 0) == 0;
    };
    bool aboutAFile = startsWithPath(flags.outputDir) ||
                      startsWithPath(flags.log) ||
                      startsWithPath(flags.evalLog);
    for (const std::string &spec : flags.inputs)
      aboutAFile |= startsWithPath(spec.substr(spec.find('=') + 1));
    if (!flags.model.empty() && !aboutAFile && msg.rfind(flags.model, 0) != 0 &&
        msg.find(".npz") == std::string::npos &&
        msg.find(".onnx") == std::string::npos && msg.rfind("--", 0) != 0)
      msg = flags.model + ": " + msg;
    return failed(msg);
  } catch (const std::bad_alloc &) {
    // Sizes the input controls are checked before they are allocated; this
    // is what remains (a busy machine, a low ulimit -v): one line, exit 1.
    return failed(flags.model + ": " + outOfMemoryMessage("running it"));
  } catch (const std::length_error &) {
    return failed(flags.model + ": " + outOfMemoryMessage("running it") +
                  " (a size past what it can hold)");
  } catch (const std::exception &e) {
    return failed(std::string("internal error: ") + e.what());
  }
}
