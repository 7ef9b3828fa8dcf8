// mpc-run's training run (tools/mpc-run/train.h): the rank's world and
// backend, a TrainingSession from the flags, the signals as stop requests,
// and the summary.
#include "tools/mpc-run/train.h"

#include "kernels/cpu/onednn.h"
#include "runtime/run_length.h"
#include "runtime/training_session.h"
#include "runtime/world/launched_world.h"
#include "support/diagnostics.h"
#include "tools/mpc-run/backend_choice.h"
#include "tools/mpc-run/run_files.h"

#include <csignal>
#include <cstdio>

namespace mpc {

namespace {

std::string formatBytes(size_t bytes) {
  char buf[64];
  if (bytes >= (size_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024);
  return buf;
}

/// The session SIGINT/SIGTERM ask to stop: it finishes the current step,
/// saves the checkpoint (with --save) and ends cleanly instead of losing
/// the run.
TrainingSession *volatile gSession = nullptr;

void requestStop(int) {
  if (TrainingSession *session = gSession)
    session->requestStop();
}

/// Points the signal handlers at a session while it lives.
struct StopRequests {
  explicit StopRequests(TrainingSession &session) {
    gSession = &session;
    std::signal(SIGINT, requestStop);
    std::signal(SIGTERM, requestStop);
  }
  ~StopRequests() { gSession = nullptr; }
};

/// The session's lines on stderr, each in one write (the ranks' lines must
/// not interleave), prefixed as mpc-run's diagnostics are.
MessageSink stderrSink(const Collective *world) {
  std::string rank =
      world ? "rank " + std::to_string(world->rank()) + ": " : "";
  return [rank](MessageKind kind, const std::string &text) {
    std::string line;
    switch (kind) {
    case MessageKind::Progress:
      break;
    case MessageKind::Note:
      line = "mpc-run: note: ";
      break;
    case MessageKind::Warning:
      line = "mpc-run: warning: ";
      break;
    case MessageKind::Event:
      line = "mpc-run: ";
      break;
    case MessageKind::RankLine:
      line = "mpc-run: " + rank;
      break;
    }
    line += text + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
  };
}

} // namespace

TrainingOptions trainingOptions(const RunFlags &f) {
  TrainingOptions o;
  o.model = f.model;
  o.resume = f.resume;
  o.seedGiven = f.seedGiven;
  o.seed = f.seed;
  o.shuffle = f.shuffle;
  o.externalData = f.externalData;
  o.data = f.data;
  o.moreData = f.moreData;
  o.synthetic = f.synthetic;
  o.batch = f.batch;
  o.steps = f.steps;
  o.epochs = f.epochs;
  o.memoryLimitGiven = f.memoryLimitGiven;
  o.memoryLimit = f.memoryLimit;
  o.evalData = f.evalData;
  o.moreEvalData = f.moreEvalData;
  o.evalLog = f.evalLog;
  o.saveBest = f.saveBest;
  o.evalEvery = f.evalEvery;
  o.earlyStop = f.earlyStop;
  o.evalEma = f.evalEma;
  o.evalMetrics = f.evalMetrics;
  o.evalOutput = f.evalOutput;
  o.tensorboard = f.tensorboard;
  o.log = f.log;
  o.save = f.save;
  o.saveEvery = f.saveEvery;
  o.debugOverflow = f.debugOverflow;
  o.minLossScale = f.minLossScale;
  o.maxSkippedSteps = f.maxSkippedSteps;
  o.exportInference = f.exportInference;
  o.exportSafetensors = f.exportSafetensors;
  o.exportOptions.outputs = f.exportOutputs;
  if (f.exportPrecision)
    o.exportOptions.precision = *f.exportPrecision;
  o.exportOptions.ema = f.exportEma;
  o.exportEma = f.exportEma;
  o.exportOnly = f.exportOnly;
  o.quiet = f.quiet;
  return o;
}

int runTraining(RunFlags f, std::unique_ptr<Collective> &world) {
  world = joinLaunchedWorld(f.collectiveTimeout);
  // Before any file is read or written: no input that would hang the run,
  // no output over an input or over another output.
  checkRunFiles(f);
  const int ranks = world ? world->size() : 1;
  const bool lead = !world || world->rank() == 0; // prints, logs, writes
  if (!lead) {
    f.quiet = true;
    f.log.clear();
    f.save.clear();
    f.saveEvery = 0;
    f.exportInference.clear();
    f.exportSafetensors.clear();
    f.evalLog.clear();
    f.saveBest.clear();
    f.tensorboard.clear();
  }
  CudaBackendOptions cuda;
  // The overflow diagnosis re-runs a step on the state before it, node by
  // node on the host: the staged backend.
  cuda.resident = f.cudaResident && !f.debugOverflow;
  cuda.graphs = f.cudaGraphs;
  cuda.cudnnDeterministic = f.cudnnDeterministic;
  // One GPU per rank of a machine, as torchrun's LOCAL_RANK.
  if (ranks > 1)
    cuda.device = launchedLocalRank();
  // Exports alone run nothing: the CPU backend holds the state.
  std::unique_ptr<Backend> backend =
      f.exportOnly ? createCpuBackend() : makeBackend(f.device, cuda);
  const bool onCuda = backend->name() == "cuda";
  // The ranks' reductions must meet in one transport: NCCL on cuda, MPI on
  // the cpu (auto could give a rank without a GPU the cpu).
  if (world)
    for (uint8_t cudaRank : gatherFromRanks(*world, uint8_t(onCuda)))
      if (bool(cudaRank) != onCuda)
        throw Error(
            "some ranks run on cuda and others on the cpu (each rank "
            "takes the GPU of its local rank); give every rank a GPU or "
            "pass --device=cpu");
  if (onCuda && f.cudaResident && f.debugOverflow && !f.quiet)
    std::fprintf(stderr, "mpc-run: --debug-overflow: the cuda backend runs "
                         "the step staged (node by node)\n");
  TrainingSession session(trainingOptions(f), *backend, world.get(),
                          stderrSink(world.get()));
  Trainer &trainer = session.trainer();
  if (f.exportOnly) {
    // --save without training writes the model (resumed) as a checkpoint,
    // e.g. again with --external-data, rather than being ignored.
    if (world && trainer.shardsState()) {
      // A sharded state is gathered from every rank: each takes part when
      // rank 0 saves (the others' --save was cleared above).
      uint8_t saving = !f.save.empty();
      world->broadcast(&saving, 1, 0);
      if (saving)
        trainer.saveCheckpoint(f.save);
    } else if (!f.save.empty() && lead) {
      trainer.saveCheckpoint(f.save);
    }
    for (const std::string &line : session.writeExports())
      if (lead)
        std::printf("%s\n", line.c_str());
    return 0;
  }
  session.prepare();

  StopRequests stopRequests(session);
  TrainingSummary s = session.run();
  if (!s.failure.empty()) {
    std::string rank =
        world ? "rank " + std::to_string(world->rank()) + ": " : "";
    std::fprintf(stderr, "mpc-run: %s%s\n", rank.c_str(), s.failure.c_str());
    return 1;
  }
  const int exitCode = session.stopRequested() ? 130 : 0;
  const int64_t batch = session.batch();
  const EpochPlan &epochs = session.epochs();
  double samplesPerSec =
      s.totalMs > 0 ? double(s.steps * batch * trainer.microBatches() * ranks) /
                          (s.totalMs / 1000.0)
                    : 0;
  if (!lead)
    return exitCode;
  if (ranks > 1)
    std::printf("data parallel: %d ranks of %lld samples per step\n", ranks,
                (long long)(batch * trainer.microBatches()));
  if (s.lastEvalStep >= 0) {
    std::string metrics;
    for (const auto &[name, value] : s.lastMetrics) {
      char shown[64];
      std::snprintf(shown, sizeof shown, ", %s %.4f", name.c_str(), value);
      metrics += shown;
    }
    std::printf("eval%s: loss %.6f%s after step %lld (%lld samples of %s)\n",
                f.evalEma ? " (ema)" : "", s.lastEval.loss, metrics.c_str(),
                (long long)s.lastEvalStep, (long long)s.lastEval.samples,
                f.evalData.c_str());
  }
  if (f.epochs > 0)
    std::printf("epochs: %lld of %lld in all, %lld steps of %lld samples "
                "each\n",
                (long long)(trainer.stepsDone() / epochs.stepsPerEpoch),
                (long long)f.epochs, (long long)epochs.stepsPerEpoch,
                (long long)epochs.globalBatch);
  std::printf("summary: steps %lld  skipped %lld  final loss %.6f  loss scale "
              "%g  %.0f samples/s  peak memory %s (%s; %zu bytes, live "
              "%zu)  time %s\n",
              (long long)s.steps, (long long)s.skipped, s.lastLoss,
              trainer.lossScale(), samplesPerSec,
              formatBytes(trainer.arenaPeakBytes()).c_str(),
              backend->name().c_str(), trainer.arenaPeakBytes(),
              trainer.peakBytes(), formatDuration(s.trainSeconds).c_str());
  if (f.verbose && !onCuda) {
    std::string kernels = cpu::onednn::kernelReport();
    std::fprintf(stderr, "cpu kernels: %s\n",
                 kernels.empty() ? "no matrix products or convolutions"
                                 : kernels.c_str());
  }
  if (onCuda) { // beside the summary, which --quiet keeps too
    CudaMemoryStats cs = loadedCudaMemoryStats(*backend);
    std::fprintf(stderr,
                 "cuda: %s step, %zu device allocations, %zu graph captures, "
                 "%zu graph replays\n",
                 trainer.executor().resident() ? "device-resident" : "staged",
                 cs.deviceAllocations, cs.graphCaptures, cs.graphLaunches);
    // The plan's arenas beside what the device really held: the plan
    // leaves out the shared workspace, cuBLAS's and cuDNN's own memory.
    std::fprintf(stderr,
                 "cuda memory: arenas %zu bytes, workspace %zu bytes, "
                 "accounted %zu bytes; measured device peak %zu bytes "
                 "(cudaMemGetInfo; pinned host %zu bytes)\n",
                 cs.arenaBytes, cs.workspaceBytes, cs.accountedBytes,
                 cs.measuredPeakBytes, cs.pinnedHostBytes);
  }
  return exitCode;
}

} // namespace mpc
