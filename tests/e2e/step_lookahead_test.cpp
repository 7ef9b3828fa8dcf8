// End to end, on the CPU: a training run whose host launches each step
// before it has read the last one's results (runtime/step_lookahead.h)
// leaves what a synchronous run leaves, byte for byte: the step log (but
// its wall-time column), the evaluation log, the progress lines (but their
// timings), checkpoints, exports, a resume from a checkpoint, and the way
// the run ends (the skipped-step limit, a loss gone NaN, early stop).
//
// The steps run on runtime's CPU backend (its results ready at once) and
// on the resident test backend in its `late` mode, whose downloads arrive
// only when their step is collected, as a GPU's do (a value read too early
// reads NaN bytes), each with MPC_STEP_LOOKAHEAD=1 and =0; the reference is
// the CPU backend's synchronous run. Each lookahead run checks that steps
// were in flight two at a time, so the comparison is not a synchronous
// run's with itself.
#include "passes/onnx/onnx_io.h"
#include "runtime/training_session.h"
#include "support/diagnostics.h"
#include "tests/e2e/parity_harness.h"
#include "tests/e2e/resident_test_backend.h"
#include "tests/support/thread_world.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace mpc;
using mpc::testing::ResidentCpuBackend;

namespace {

enum class Mode { CpuSync, CpuAhead, LateSync, LateAhead };
const Mode kModes[] = {Mode::CpuSync, Mode::CpuAhead, Mode::LateSync,
                       Mode::LateAhead};
const char *modeName(Mode m) {
  switch (m) {
  case Mode::CpuSync:
    return "cpu-sync";
  case Mode::CpuAhead:
    return "cpu-ahead";
  case Mode::LateSync:
    return "late-sync";
  case Mode::LateAhead:
    return "late-ahead";
  }
  return "?";
}
bool ahead(Mode m) { return m == Mode::CpuAhead || m == Mode::LateAhead; }

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "<no file " + path + ">";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The step log without its ms column (the 5th), the one column that is
/// wall time.
std::string withoutTimes(const std::string &log) {
  std::istringstream in(log);
  std::string line, out;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream cs(line);
    std::string cell;
    while (std::getline(cs, cell, ','))
      cells.push_back(cell);
    for (size_t i = 0; i < cells.size(); ++i)
      if (i != 4)
        out += cells[i] + (i + 1 < cells.size() ? "," : "");
    out += "\n";
  }
  return out;
}

/// What a run leaves.
struct Outcome {
  std::string log, evalLog, checkpoint, safetensors, inference, lines;
  TrainingSummary summary;
  size_t mostInFlight = 0; ///< the late backend's steps in flight at once
};

/// Trains models/<model> compiled with `c` under `o` in `dir`, on `mode`'s
/// backend; `stopAt`: a progress line that asks the run to stop.
Outcome train(Mode mode, const std::string &model, const CompileOptions &c,
              TrainingOptions o, const std::string &dir,
              const std::string &stopAt = "") {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ::setenv("MPC_STEP_LOOKAHEAD", ahead(mode) ? "1" : "0", 1);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  ResidentCpuBackend late;
  late.late = true;
  Backend &backend =
      mode == Mode::CpuSync || mode == Mode::CpuAhead ? *cpu : late;
  o.log = dir + "/log.csv";
  if (!o.evalData.empty())
    o.evalLog = dir + "/eval.csv";
  Outcome out;
  TrainingSession *session = nullptr;
  TrainingSession s(
      parity::compile(model, c), o, backend, nullptr,
      [&](MessageKind k, const std::string &line) {
        // Progress lines end with the time per step and ETA.
        out.lines += std::to_string(int(k)) + " " +
                     std::regex_replace(
                         line, std::regex("  [0-9.]+ ms/step  ETA .*"), "") +
                     "\n";
        if (!stopAt.empty() && line.rfind(stopAt, 0) == 0)
          session->requestStop();
      });
  session = &s;
  out.summary = s.run();
  ::unsetenv("MPC_STEP_LOOKAHEAD");
  out.log = withoutTimes(readFile(o.log));
  if (!o.evalLog.empty())
    out.evalLog = readFile(o.evalLog);
  if (!o.save.empty())
    out.checkpoint = readFile(o.save);
  if (!o.exportSafetensors.empty())
    out.safetensors = readFile(o.exportSafetensors);
  if (!o.exportInference.empty())
    out.inference = readFile(o.exportInference);
  out.mostInFlight = late.counts.mostInFlight;
  return out;
}

TrainingOptions seedRun(int64_t steps) {
  TrainingOptions o;
  o.model = "mlp_seed.onnx";
  o.data = parity::modelsDir() + "mlp_seed_data.npz";
  o.steps = steps;
  return o;
}

/// Every mode's run of the case equals the CPU's synchronous run; the
/// lookahead runs on the late backend had two steps in flight (when
/// `overlaps`: a run can be all boundaries).
void expectSameRuns(const std::string &name, const std::string &model,
                    const CompileOptions &c, const TrainingOptions &o,
                    bool overlaps = true) {
  const std::string root = ::testing::TempDir() + "/step_lookahead_" + name;
  // The failure's line is the backend's own (a resident step does not
  // trace overflows): each backend's lookahead run is held to its own
  // synchronous run's.
  Outcome ref, refOfBackend;
  for (Mode mode : kModes) {
    SCOPED_TRACE(std::string(name) + ", " + modeName(mode));
    TrainingOptions run = o;
    std::string dir = root + "/" + modeName(mode);
    // The files' paths are the same in every mode's run (a checkpoint's
    // metadata could name them): each run writes in `root` and moves on.
    if (!o.save.empty())
      run.save = root + "/ckpt.onnx";
    if (!o.exportSafetensors.empty())
      run.exportSafetensors = root + "/model.safetensors";
    if (!o.exportInference.empty())
      run.exportInference = root + "/model.onnx";
    Outcome got = train(mode, model, c, run, dir);
    if (mode == Mode::CpuSync || mode == Mode::LateSync)
      refOfBackend = got;
    if (mode == Mode::CpuSync) {
      ref = got;
      EXPECT_NE(ref.log.find('\n'), std::string::npos);
      continue;
    }
    EXPECT_EQ(got.log, ref.log);
    EXPECT_EQ(got.evalLog, ref.evalLog);
    EXPECT_EQ(got.lines, ref.lines);
    EXPECT_TRUE(got.checkpoint == ref.checkpoint) << "checkpoints differ";
    EXPECT_TRUE(got.safetensors == ref.safetensors) << "exports differ";
    EXPECT_TRUE(got.inference == ref.inference) << "exports differ";
    EXPECT_EQ(got.summary.steps, ref.summary.steps);
    EXPECT_EQ(got.summary.skipped, ref.summary.skipped);
    EXPECT_EQ(got.summary.failure, refOfBackend.summary.failure);
    EXPECT_EQ(got.summary.failure.empty(), ref.summary.failure.empty());
    EXPECT_EQ(got.summary.lastEvalStep, ref.summary.lastEvalStep);
    // Runs in flight: one optimizer step's K micro-batches, two steps'
    // when one was launched ahead.
    const size_t k = size_t(c.gradAccum);
    if (mode == Mode::LateAhead && overlaps)
      EXPECT_EQ(got.mostInFlight, 2 * k);
    if (mode == Mode::LateSync)
      EXPECT_EQ(got.mostInFlight, k);
  }
}

CompileOptions fp16Adam() { return parity::options("adam", DType::F16); }

TEST(StepLookahead, PlainFp16RunWithItsCheckpointAndExports) {
  TrainingOptions o = seedRun(12);
  o.save = "ckpt.onnx";
  o.exportSafetensors = "model.safetensors";
  o.exportInference = "model.onnx";
  expectSameRuns("plain", "mlp_seed.onnx", fp16Adam(), o);
}

// An fp32 run whose loss goes NaN (lr 1e30) with a static scale of 1: its
// steps are skipped until the limit ends the run, after the same step.
TEST(StepLookahead, Fp32RunStoppedByANaNLoss) {
  CompileOptions c = parity::options("sgd", DType::F32);
  c.lr = 1e30;
  c.lossScale = "static:1";
  TrainingOptions o = seedRun(30);
  o.maxSkippedSteps = 4;
  o.save = "ckpt.onnx";
  expectSameRuns("nan_stop", "mlp_seed.onnx", c, o);
  // The case is what it says: the run did end at the limit.
  Outcome sync = train(Mode::CpuSync, "mlp_seed.onnx", c, o,
                       ::testing::TempDir() + "/step_lookahead_nan_stop_check");
  EXPECT_NE(sync.summary.failure.find("consecutive skipped steps"),
            std::string::npos)
      << sync.summary.failure;
  EXPECT_LT(sync.summary.steps, 30);
  EXPECT_NE(sync.log.find("nan"), std::string::npos) << sync.log;
}

// fp16 with a scale every step overflows: the limit of 3 stops the run.
TEST(StepLookahead, SkippedStepLimit) {
  CompileOptions c = fp16Adam();
  c.lossScale = "static:1e30";
  TrainingOptions o = seedRun(10);
  o.maxSkippedSteps = 3;
  expectSameRuns("skip_limit", "mlp_seed.onnx", c, o, /*overlaps=*/false);
}

TEST(StepLookahead, CheckpointsEveryKStepsAndAResume) {
  TrainingOptions o = seedRun(10);
  o.save = "ckpt.onnx";
  o.saveEvery = 3;
  expectSameRuns("save_every", "mlp_seed.onnx", fp16Adam(), o);
  // A run resumed from step 9's checkpoint (--save-every=3 of 10 steps
  // leaves step 9's at the last save-every, then 10's at the end).
  const std::string root = ::testing::TempDir() + "/step_lookahead_resume";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  TrainingOptions first = seedRun(9);
  first.save = root + "/start.onnx";
  train(Mode::CpuSync, "mlp_seed.onnx", fp16Adam(), first, root + "/first");
  TrainingOptions resumed = seedRun(7);
  resumed.resume = first.save;
  resumed.save = "ckpt.onnx";
  resumed.saveEvery = 2;
  expectSameRuns("resumed", "mlp_seed.onnx", fp16Adam(), resumed);
}

TEST(StepLookahead, EvaluationsEveryKStepsAndEarlyStop) {
  TrainingOptions o = seedRun(13);
  o.evalData = parity::modelsDir() + "mlp_seed_data.npz";
  o.evalEvery = 4;
  o.save = "ckpt.onnx";
  expectSameRuns("eval_every", "mlp_seed.onnx", fp16Adam(), o);
  // An lr this high makes the validation loss rise: early stop after two.
  CompileOptions c = parity::options("sgd", DType::F16);
  c.lr = 5;
  o.steps = 40;
  o.evalEvery = 3;
  o.earlyStop = 2;
  expectSameRuns("early_stop", "mlp_seed.onnx", c, o);
}

TEST(StepLookahead, GradientAccumulation) {
  CompileOptions c = fp16Adam();
  c.gradAccum = 3;
  TrainingOptions o = seedRun(7);
  o.save = "ckpt.onnx";
  o.exportSafetensors = "model.safetensors";
  expectSameRuns("grad_accum", "mlp_seed.onnx", c, o);
}

TEST(StepLookahead, EpochsAndAShuffledOrder) {
  TrainingOptions o = seedRun(0);
  o.epochs = 3;
  o.shuffle = true;
  o.save = "ckpt.onnx";
  expectSameRuns("epochs", "mlp_seed.onnx", fp16Adam(), o);
}

// A stop request (SIGINT) seen while step 4 is in flight ends the run after
// step 4: later than a synchronous run, never between a step and its
// checkpoint. The checkpoint, log and export are a synchronous run's of as
// many steps.
TEST(StepLookahead, StopRequestEndsAfterALaunchedStep) {
  const std::string root = ::testing::TempDir() + "/step_lookahead_stop";
  TrainingOptions o = seedRun(10);
  o.save = root + "/ckpt.onnx";
  o.exportSafetensors = root + "/model.safetensors";
  Outcome stopped = train(Mode::LateAhead, "mlp_seed.onnx", fp16Adam(), o,
                          root + "/stopped", "step 3/10");
  ASSERT_TRUE(stopped.summary.stopRequested);
  const int64_t n = stopped.summary.steps;
  EXPECT_GE(n, 3);
  EXPECT_LE(n, 4);
  TrainingOptions straight = seedRun(n);
  straight.save = o.save;
  straight.exportSafetensors = o.exportSafetensors;
  Outcome ref =
      train(Mode::CpuSync, "mlp_seed.onnx", fp16Adam(), straight, root + "/n");
  EXPECT_EQ(stopped.log, ref.log);
  EXPECT_TRUE(stopped.checkpoint == ref.checkpoint);
  EXPECT_TRUE(stopped.safetensors == ref.safetensors);
}

// Two ranks (threads) of a data-parallel run: each rank's log, the
// checkpoint and the gathered losses are the synchronous run's.
TEST(StepLookahead, DataParallelRanks) {
  CompileOptions c = fp16Adam();
  c.dataParallel = true;
  const std::string root = ::testing::TempDir() + "/step_lookahead_dp";
  std::vector<std::string> logs[2];
  for (Mode mode : {Mode::CpuSync, Mode::CpuAhead, Mode::LateAhead}) {
    SCOPED_TRACE(modeName(mode));
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
    ::setenv("MPC_STEP_LOOKAHEAD", ahead(mode) ? "1" : "0", 1);
    test::ThreadWorld world(2);
    std::vector<std::string> rankLogs(2);
    size_t inFlight = 0;
    world.run([&](int r) {
      std::unique_ptr<Backend> cpu = createCpuBackend();
      ResidentCpuBackend late;
      late.late = true;
      Backend &backend = mode == Mode::LateAhead ? late : *cpu;
      TrainingOptions o = seedRun(9);
      o.quiet = true;
      o.log = root + "/log" + std::to_string(r) + ".csv";
      o.save = r == 0 ? root + "/ckpt.onnx" : "";
      o.saveEvery = r == 0 ? 4 : 0; // as mpc-run starts its ranks
      TrainingSession s(parity::compile("mlp_seed.onnx", c), o, backend,
                        &world.rank(r));
      TrainingSummary sum = s.run();
      EXPECT_TRUE(sum.failure.empty()) << sum.failure;
      rankLogs[size_t(r)] = withoutTimes(readFile(o.log));
      if (r == 0)
        inFlight = late.counts.mostInFlight;
    });
    ::unsetenv("MPC_STEP_LOOKAHEAD");
    rankLogs.push_back(readFile(root + "/ckpt.onnx"));
    EXPECT_EQ(rankLogs[0], rankLogs[1]); // the ranks log the mean loss
    if (mode == Mode::CpuSync)
      logs[0] = rankLogs;
    else
      EXPECT_TRUE(rankLogs == logs[0]);
    if (mode == Mode::LateAhead)
      EXPECT_EQ(inFlight, 2u);
  }
}

// A step that fails when it is launched (a kernel finding bad data) ends
// the run with its error after the step before it was logged, whether or
// not it was launched ahead of that step's results.
TEST(StepLookahead, AStepThatFailsAtLaunchEndsTheRunAfterTheLastOnesLog) {
  const std::string root = ::testing::TempDir() + "/step_lookahead_fail";
  std::string logs[2], errors[2];
  for (int ahead = 0; ahead < 2; ++ahead) {
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
    ::setenv("MPC_STEP_LOOKAHEAD", ahead ? "1" : "0", 1);
    ResidentCpuBackend late;
    late.late = true;
    late.failAtStep = 4;
    TrainingOptions o = seedRun(10);
    o.quiet = true;
    o.log = root + "/log.csv";
    { // the log is on disk once the session is gone
      TrainingSession s(parity::compile("mlp_seed.onnx", fp16Adam()), o, late);
      try {
        s.run();
        ADD_FAILURE() << "ran";
      } catch (const Error &e) {
        errors[ahead] = e.what();
      }
    }
    ::unsetenv("MPC_STEP_LOOKAHEAD");
    logs[ahead] = withoutTimes(readFile(o.log));
    if (ahead)
      EXPECT_EQ(late.counts.mostInFlight, 2u);
  }
  EXPECT_EQ(errors[0], "step 4 failed on the device");
  EXPECT_EQ(errors[1], errors[0]);
  EXPECT_EQ(logs[1], logs[0]);
  EXPECT_NE(logs[0].find("\n3,"), std::string::npos) << logs[0];
  EXPECT_EQ(logs[0].find("\n4,"), std::string::npos) << logs[0];
}

// A step whose device finds bad data (reported by the wait on the step)
// ends the run with the error after the step before it was logged: the
// step launched ahead of it changes nothing the user sees.
TEST(StepLookahead, AnErrorFoundOnTheDeviceEndsTheRunAtItsStep) {
  const std::string root = ::testing::TempDir() + "/step_lookahead_device";
  std::string logs[2], errors[2];
  for (int ahead = 0; ahead < 2; ++ahead) {
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
    ::setenv("MPC_STEP_LOOKAHEAD", ahead ? "1" : "0", 1);
    ResidentCpuBackend late;
    late.late = true;
    late.failWaitOfStep = 5;
    TrainingOptions o = seedRun(10);
    o.quiet = true;
    o.log = root + "/log.csv";
    {
      TrainingSession s(parity::compile("mlp_seed.onnx", fp16Adam()), o, late);
      try {
        s.run();
        ADD_FAILURE() << "ran";
      } catch (const Error &e) {
        errors[ahead] = e.what();
      }
    }
    ::unsetenv("MPC_STEP_LOOKAHEAD");
    logs[ahead] = withoutTimes(readFile(o.log));
    EXPECT_EQ(late.counts.mostInFlight, ahead ? 2u : 1u);
  }
  EXPECT_EQ(errors[0], "step 5: a label out of range (found on the device)");
  EXPECT_EQ(errors[1], errors[0]);
  EXPECT_EQ(logs[1], logs[0]);
  EXPECT_NE(logs[0].find("\n4,"), std::string::npos) << logs[0];
  EXPECT_EQ(logs[0].find("\n5,"), std::string::npos) << logs[0];
}

// A bad MPC_STEP_LOOKAHEAD is one line naming it, before any step.
TEST(StepLookahead, BadSwitchIsRefused) {
  ::setenv("MPC_STEP_LOOKAHEAD", "yes", 1);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  TrainingSession s(parity::compile("mlp_seed.onnx", fp16Adam()), seedRun(3),
                    *cpu);
  try {
    s.run();
    ADD_FAILURE() << "ran";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("MPC_STEP_LOOKAHEAD='yes'"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("MPC_STEP_LOOKAHEAD");
  EXPECT_EQ(s.summary().steps, 0);
}

} // namespace
