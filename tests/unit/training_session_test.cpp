// TrainingSession's policies (runtime/training_session.h,
// runtime/eval_policy.h) on models/mlp_seed.onnx compiled here through the
// passes API: the eval cadence of a resumed run, early stop, plateau
// stepping, the best checkpoint, the skipped-step limit and a stop request.
#include "passes/onnx/onnx_io.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "runtime/backend.h"
#include "runtime/eval_policy.h"
#include "runtime/run_length.h"
#include "runtime/training_session.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

using namespace mpc;

namespace {

const std::string kModels = std::string(MPC_SOURCE_DIR) + "/models/";

std::unique_ptr<Model> compileSeed(const CompileOptions &o) {
  auto model = loadModel(kModels + "mlp_seed.onnx");
  Statistics stats;
  runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
  return model;
}

CompileOptions sgd(double lr) {
  CompileOptions o;
  o.optimizer = "sgd";
  o.lr = lr;
  o.lrSet = true;
  return o;
}

/// A fresh folder for one test's files.
std::string tempDir(const std::string &name) {
  std::string dir = ::testing::TempDir() + "/training_session_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TrainingOptions seedOptions(int64_t steps) {
  TrainingOptions o;
  o.model = "mlp_seed.onnx";
  o.data = kModels + "mlp_seed_data.npz";
  o.steps = steps;
  o.quiet = true;
  return o;
}

/// The lines a session sends to its sink, by kind.
struct Lines {
  std::vector<std::pair<MessageKind, std::string>> all;
  int count(MessageKind kind, const std::string &part) const {
    int n = 0;
    for (const auto &[k, line] : all)
      n += k == kind && line.find(part) != std::string::npos;
    return n;
  }
};

/// The step count of a checkpoint.
int64_t stepsIn(const std::string &checkpoint) {
  auto backend = createCpuBackend();
  Trainer t(compileSeed(sgd(0.1)), *backend);
  t.resumeFrom(checkpoint);
  return t.stepsDone();
}

} // namespace

TEST(EvalPolicy, CadenceIsAFunctionOfTheGlobalStepOnly) {
  EXPECT_TRUE(evalDueAt(6, 3));
  EXPECT_FALSE(evalDueAt(7, 3));
  EXPECT_FALSE(evalDueAt(6, 0)); // no cadence: after the last step only
}

TEST(EvalPolicy, BestLossIgnoresNaNAndTies) {
  double best = std::numeric_limits<double>::quiet_NaN();
  int64_t since = 0;
  EXPECT_FALSE(recordEvalLoss(std::nan(""), best, since)); // never the best
  EXPECT_EQ(since, 1);
  EXPECT_TRUE(recordEvalLoss(2.0, best, since));
  EXPECT_EQ(best, 2.0);
  EXPECT_EQ(since, 0);
  EXPECT_FALSE(recordEvalLoss(2.0, best, since)); // a tie is no better
  EXPECT_FALSE(recordEvalLoss(3.0, best, since));
  EXPECT_EQ(since, 2);
  EXPECT_TRUE(earlyStopDue(since, 2));
  EXPECT_FALSE(earlyStopDue(since, 3));
  EXPECT_FALSE(earlyStopDue(since, 0));
}

TEST(EvalPolicy, SkippedStepLimitCountsOnlyStepsThatCannotRecover) {
  SkippedStepLimit limit(2, /*minLossScale=*/1);
  // Dynamic backoff that halves the scale above the floor: recoverable.
  EXPECT_FALSE(limit.record(true, 1024, 512));
  EXPECT_FALSE(limit.record(true, 512, 256));
  EXPECT_EQ(limit.inARow(), 0);
  // A static scale (not lowered) twice in a row reaches the limit.
  EXPECT_FALSE(limit.record(true, 8, 8));
  EXPECT_TRUE(limit.record(true, 8, 8));
  // A step that did not skip starts the count again.
  EXPECT_FALSE(limit.record(false, 8, 8));
  EXPECT_EQ(limit.inARow(), 0);
  // Below the floor, or not finite, even a lowered scale cannot recover.
  EXPECT_TRUE(limit.belowFloor(0.5));
  EXPECT_TRUE(limit.belowFloor(std::nan("")));
  EXPECT_TRUE(limit.belowFloor(INFINITY));
  EXPECT_FALSE(limit.record(true, 0.5, 0.25));
  EXPECT_TRUE(limit.record(true, 0.25, 0.125));
  EXPECT_FALSE(SkippedStepLimit(0, 1).record(true, 8, 8)); // 0: never
}

// 20 steps, and 10 steps then 10 resumed from the checkpoint, evaluate at
// the same global steps with the same losses: the cadence is the global
// step's, and the resumed run's evaluation log goes on from the checkpoint.
TEST(TrainingSession, EvalCadenceOfAResumedRunIsTheStraightRuns) {
  std::string dir = tempDir("cadence");
  auto backend = createCpuBackend();
  TrainingOptions straight = seedOptions(20);
  straight.evalData = kModels + "mlp_seed_data.npz";
  straight.evalEvery = 3;
  straight.evalLog = dir + "/straight.csv";
  TrainingSession a(compileSeed(sgd(0.1)), straight, *backend);
  TrainingSummary sa = a.run();
  ASSERT_TRUE(sa.failure.empty()) << sa.failure;

  TrainingOptions first = straight;
  first.steps = 10;
  first.evalLog = dir + "/split.csv";
  first.save = dir + "/ckpt.onnx";
  {
    TrainingSession b(compileSeed(sgd(0.1)), first, *backend);
    b.run();
    // The evaluation after step 10, off the cadence, is reported only.
    EXPECT_EQ(b.summary().lastEvalStep, 10);
  }
  TrainingOptions second = first;
  second.resume = first.save;
  second.save.clear();
  TrainingSession c(compileSeed(sgd(0.1)), second, *backend);
  c.run();
  EXPECT_EQ(c.trainer().stepsDone(), 20);

  std::string log = readFile(straight.evalLog);
  EXPECT_EQ(readFile(first.evalLog), log);
  std::vector<std::string> steps;
  std::istringstream rows(log);
  for (std::string row; std::getline(rows, row);)
    steps.push_back(row.substr(0, row.find(',')));
  EXPECT_EQ(steps, (std::vector<std::string>{"step", "3", "6", "9", "12", "15",
                                             "18"}));
  EXPECT_EQ(a.trainer().bestEvalLoss, c.trainer().bestEvalLoss);
  EXPECT_EQ(a.trainer().evalsSinceBest, c.trainer().evalsSinceBest);
}

// A rate too small to move an fp32 weight: every validation loss equals the
// first. The first is the best (the only --save-best checkpoint); two more
// without a lower one end the run with --early-stop=2.
TEST(TrainingSession, EarlyStopAfterEvaluationsWithoutImprovement) {
  std::string dir = tempDir("early_stop");
  auto backend = createCpuBackend();
  TrainingOptions o = seedOptions(20);
  o.quiet = false;
  o.evalData = kModels + "mlp_seed_data.npz";
  o.evalEvery = 2;
  o.earlyStop = 2;
  o.saveBest = dir + "/best.onnx";
  Lines lines;
  TrainingSession s(compileSeed(sgd(1e-30)), o, *backend,
                    /*world=*/nullptr,
                    [&](MessageKind k, const std::string &line) {
                      lines.all.push_back({k, line});
                    });
  TrainingSummary sum = s.run();
  ASSERT_TRUE(sum.failure.empty()) << sum.failure;
  EXPECT_EQ(sum.steps, 6);
  EXPECT_EQ(s.trainer().stepsDone(), 6);
  EXPECT_EQ(s.trainer().evalsSinceBest, 2);
  EXPECT_EQ(lines.count(MessageKind::Event,
                        "early stop after step 6: no lower validation loss "
                        "in 2 evaluations"),
            1);
  // The best checkpoint is written on improvement only: at step 2.
  EXPECT_EQ(lines.count(MessageKind::Progress, "eval: best so far"), 1);
  EXPECT_EQ(stepsIn(o.saveBest), 2);
}

// Improving losses: the best checkpoint follows the lowest loss.
TEST(TrainingSession, BestCheckpointIsTheLowestLossSoFar) {
  std::string dir = tempDir("best");
  auto backend = createCpuBackend();
  TrainingOptions o = seedOptions(8);
  o.evalData = kModels + "mlp_seed_data.npz";
  o.evalEvery = 4;
  o.saveBest = dir + "/best.onnx";
  double lossAt4 = 0;
  TrainingSession s(compileSeed(sgd(0.05)), o, *backend);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(s.step());
    if (s.trainer().stepsDone() == 4)
      lossAt4 = s.summary().lastEval.loss;
  }
  double lossAt8 = s.summary().lastEval.loss;
  ASSERT_LT(lossAt8, lossAt4) << "training did not lower the loss";
  EXPECT_EQ(s.trainer().bestEvalLoss, lossAt8);
  EXPECT_EQ(stepsIn(o.saveBest), 8);
}

namespace {

/// The rate after each of `evals` evaluations (one per step) of a model
/// whose rate follows ReduceLROnPlateau(factor=0.5, patience=1), relative
/// to `lr`.
std::vector<double> plateauRates(double lr, int evals) {
  auto backend = createCpuBackend();
  CompileOptions c = sgd(lr);
  c.lrSchedule = "reduce_lr_on_plateau";
  c.lrFactor = 0.5;
  c.lrPatience = 1;
  TrainingOptions o = seedOptions(evals);
  o.evalData = kModels + "mlp_seed_data.npz";
  o.evalEvery = 1;
  TrainingSession s(compileSeed(c), o, *backend);
  std::vector<double> rates;
  for (int i = 0; i < evals; ++i) {
    EXPECT_TRUE(s.step());
    rates.push_back(s.trainer().lr() / lr);
  }
  return rates;
}

} // namespace

// torch.optim.lr_scheduler.ReduceLROnPlateau(factor=0.5, patience=1) on a
// loss that moves far less than its threshold (1e-4 relative) at lr 1e-6:
// the rate halves at the 3rd and 5th evaluations (the bad count passes
// patience, then restarts). A cut smaller than eps (1e-8) is not made, as
// torch does not make it.
TEST(TrainingSession, PlateauSteppingLowersTheRateAsTorchDoes) {
  std::vector<double> expected = {1, 1, 0.5, 0.5, 0.25, 0.25};
  std::vector<double> rates = plateauRates(1e-6, 6);
  ASSERT_EQ(rates.size(), expected.size());
  for (size_t i = 0; i < rates.size(); ++i)
    EXPECT_NEAR(rates[i], expected[i], 1e-9) << "after evaluation " << i + 1;
  for (double r : plateauRates(1e-30, 4))
    EXPECT_EQ(r, 1.0);
}

// A static scale that overflows every fp16 step: the run ends at the limit
// with the reason, before the steps it was asked for.
TEST(TrainingSession, SkippedStepLimitEndsTheRun) {
  auto backend = createCpuBackend();
  CompileOptions c = sgd(0.1);
  c.precision = DType::F16;
  c.lossScale = "static:1e30";
  TrainingOptions o = seedOptions(10);
  o.maxSkippedSteps = 3;
  TrainingSession s(compileSeed(c), o, *backend);
  TrainingSummary sum = s.run();
  EXPECT_EQ(sum.steps, 3);
  EXPECT_EQ(sum.skipped, 3);
  EXPECT_NE(sum.failure.find("mlp_seed.onnx: step 3: 3 consecutive skipped "
                             "steps with the loss scale 1e+30, which the "
                             "skipped steps did not lower (a static scale)"),
            std::string::npos)
      << sum.failure;

  // Without a limit every step runs (and skips).
  o.maxSkippedSteps = 0;
  TrainingSession unlimited(compileSeed(c), o, *backend);
  TrainingSummary all = unlimited.run();
  EXPECT_TRUE(all.failure.empty()) << all.failure;
  EXPECT_EQ(all.steps, 10);
  EXPECT_EQ(all.skipped, 10);
}

// A stop request (what SIGINT/SIGTERM set) during step 3 ends the run after
// that step, with the checkpoint of step 3.
TEST(TrainingSession, StopRequestEndsAfterTheCurrentStepWithACheckpoint) {
  std::string dir = tempDir("stop");
  auto backend = createCpuBackend();
  TrainingOptions o = seedOptions(10);
  o.quiet = false;
  o.save = dir + "/ckpt.onnx";
  Lines lines;
  TrainingSession *session = nullptr;
  TrainingSession s(compileSeed(sgd(0.1)), o, *backend, /*world=*/nullptr,
                    [&](MessageKind k, const std::string &line) {
                      lines.all.push_back({k, line});
                      if (line.rfind("step 3/10", 0) == 0)
                        session->requestStop();
                    });
  session = &s;
  TrainingSummary sum = s.run();
  EXPECT_TRUE(sum.stopRequested);
  EXPECT_EQ(sum.steps, 3);
  EXPECT_EQ(lines.count(MessageKind::Event,
                        "interrupted after step 3, saving the checkpoint"),
            1);
  EXPECT_EQ(stepsIn(o.save), 3);
}

// A step on given batches checks that it has one per micro-batch.
TEST(TrainingSession, StepOnGivenBatchesNeedsOnePerMicroBatch) {
  auto backend = createCpuBackend();
  TrainingSession s(compileSeed(sgd(0.1)), seedOptions(1), *backend);
  EXPECT_THROW(s.step(std::vector<Trainer::Batch>{}), Error);
}

// The data order across ranks and micro-batches: N ranks of K micro-batches
// of B samples read, in each step, the samples one process reads in a batch
// of K*N*B, in the same order, in every (shuffled) epoch.
TEST(TrainingSession, RanksAndMicroBatchesReadTheOrderOfOneProcess) {
  auto backend = createCpuBackend();
  Trainer t(compileSeed(sgd(0.1)), *backend);
  int64_t batch = 0;
  Dataset data =
      Dataset::fromNpz(kModels + "mlp_seed_data.npz", t.dataInputs(batch));
  const int64_t b = 8, k = 2, n = 3, seed = 7;
  EpochPlan split = planEpochs(data.numSamples(), b, k, n, "data");
  EpochPlan whole = planEpochs(data.numSamples(), b * k * n, 1, 1, "data");
  ASSERT_EQ(split.stepsPerEpoch, whole.stepsPerEpoch);
  // Three epochs' steps, so that the shuffled order changes between them.
  for (int64_t step = 0; step < 3 * whole.stepsPerEpoch; ++step) {
    auto one = data.batch(batchIndexOf(step, 1, 0, 1, 0), b * k * n, true, seed,
                          whole.batchesPerEpoch);
    for (int64_t j = 0; j < k; ++j)
      for (int64_t r = 0; r < n; ++r) {
        auto part = data.batch(batchIndexOf(step, k, j, n, r), b, true, seed,
                               split.batchesPerEpoch);
        ASSERT_EQ(part.size(), one.size());
        for (size_t i = 0; i < one.size(); ++i) {
          const Tensor &all = one[i].second, &mine = part[i].second;
          size_t rowBytes = all.byteSize() / size_t(b * k * n);
          size_t offset = size_t((j * n + r) * b) * rowBytes;
          ASSERT_EQ(mine.byteSize(), rowBytes * size_t(b));
          ASSERT_EQ(0, std::memcmp(all.data<char>() + offset, mine.data<char>(),
                                   mine.byteSize()))
              << one[i].first << " step " << step << " micro-batch " << j
              << " rank " << r;
        }
      }
  }
}
