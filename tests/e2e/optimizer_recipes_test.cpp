// End to end: the optimizer recipes users bring from PyTorch, on the seed
// MLP against torch.optim's own runs (models/make_lr_schedule_refs.py and
// models/make_param_group_refs.py): the rate of every update, the loss of
// every step and the parameters after 30 steps.
//  - --lr-schedule (passes/optimizer/lr_schedule.h): the schedulers users
//  attach
//    (transformers' get_*_schedule_with_warmup, torch's StepLR and
//    ExponentialLR), scheduler.step() after every optimizer.step(). The
//    schedule follows the updates applied: steps the loss scaler skips and
//    the micro-batches of a --grad-accum window do not advance it.
//  - --no-weight-decay (passes/optimizer/optimizer.cpp): two parameter groups,
//  the
//    biases without weight decay, as transformers' Trainer and timm build.
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/data/npz.h"
#include "runtime/trainer.h"
#include "support/diagnostics.h"
#include "tests/e2e/batch_split.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

using namespace mpc;

namespace {

const std::string &kModels = test::modelsDir();

/// One run of the reference scripts' RUNS, as mpc-opt's options.
struct ScheduledRun {
  std::string name;
  CompileOptions options;
};

CompileOptions fp32(const std::string &optimizer, double lr,
                    const std::string &schedule, double momentum = 0) {
  CompileOptions o;
  o.precision = DType::F32;
  o.optimizer = optimizer;
  o.lr = lr;
  o.momentum = momentum;
  o.lrSchedule = schedule;
  return o;
}

std::vector<ScheduledRun> runs() {
  std::vector<ScheduledRun> r;
  CompileOptions o = fp32("sgd", 0.05, "cosine", 0.9);
  o.warmupSteps = 5;
  o.totalSteps = 30;
  r.push_back({"sgd_cosine", o});
  o = fp32("adamw", 1e-2, "linear");
  o.warmupSteps = 4;
  o.totalSteps = 20;
  r.push_back({"adamw_linear", o});
  o = fp32("adam", 1e-2, "cosine");
  o.totalSteps = 30;
  o.minLrRatio = 0.1;
  r.push_back({"adam_cosine_min", o});
  o = fp32("sgd", 0.1, "constant");
  o.warmupSteps = 10;
  r.push_back({"sgd_constant_warmup", o});
  o = fp32("sgd", 0.1, "step", 0.9);
  o.lrStepSize = 7;
  o.lrGamma = 0.5;
  r.push_back({"sgd_step", o});
  o = fp32("adam", 1e-2, "exponential");
  o.lrGamma = 0.9;
  r.push_back({"adam_exponential", o});
  o = fp32("adamw", 1e-2, "polynomial");
  o.warmupSteps = 3;
  o.totalSteps = 20;
  o.lrEnd = 1e-4;
  o.lrPower = 2;
  r.push_back({"adamw_polynomial", o});
  o = fp32("sgd", 0.1, "inverse_sqrt", 0.9);
  o.warmupSteps = 5;
  r.push_back({"sgd_inverse_sqrt", o});
  o = fp32("adam", 1e-2, "cosine_with_restarts");
  o.warmupSteps = 2;
  o.totalSteps = 30;
  o.lrCycles = 3;
  r.push_back({"adam_restarts", o});
  o = fp32("adamw", 1e-2, "warmup_stable_decay");
  o.warmupSteps = 4;
  o.lrDecaySteps = 10;
  o.totalSteps = 26;
  o.lrWarmupType = "cosine";
  o.lrDecayType = "1-sqrt";
  o.minLrRatio = 0.1;
  r.push_back({"adamw_wsd", o});
  return r;
}

struct Reference {
  std::vector<double> loss, lr;
};

Reference readReference(const std::string &file) {
  std::ifstream in(kModels + file);
  EXPECT_TRUE(in) << file;
  Reference ref;
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "step,loss,lr");
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string step, loss, lr;
    std::getline(row, step, ',');
    std::getline(row, loss, ',');
    std::getline(row, lr, ',');
    ref.loss.push_back(std::stod(loss));
    ref.lr.push_back(std::stod(lr));
  }
  return ref;
}

std::unique_ptr<Model> compileSeed(const CompileOptions &o) {
  auto model = loadModel(kModels + "mlp_seed.onnx");
  Statistics stats;
  runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
  return model;
}

/// `steps` steps of the seed MLP, batches in order.
std::vector<StepRecord> train(Trainer &t, int64_t steps) {
  int64_t batch = 0;
  Dataset data =
      Dataset::fromNpz(kModels + "mlp_seed_data.npz", t.dataInputs(batch));
  std::vector<StepRecord> records;
  for (int64_t i = 0; i < steps; ++i)
    records.push_back(t.step(data.batch(t.stepsDone(), batch, false, 0)));
  return records;
}

/// Each run trains as torch's mlp_seed_ref_<prefix><name>.csv and _final.npz
/// say: rates, losses and final parameters.
void expectRunsMatchTorch(const std::vector<ScheduledRun> &runs,
                          const std::string &prefix) {
  auto backend = createCpuBackend();
  for (const ScheduledRun &run : runs) {
    SCOPED_TRACE(run.name);
    const std::string file = "mlp_seed_ref_" + prefix + run.name;
    Reference ref = readReference(file + ".csv");
    ASSERT_EQ(ref.loss.size(), 30u);
    Trainer t(compileSeed(run.options), *backend);
    std::vector<StepRecord> got = train(t, 30);
    for (size_t i = 0; i < 30; ++i) {
      // A schedule's rate is the same double (torch's recurrences, StepLR's
      // and ExponentialLR's, round differently from the closed form in the
      // last bits); a constant rate is the updates' fp32 attribute.
      if (t.hasLrSchedule())
        EXPECT_NEAR(got[i].lr, ref.lr[i], 1e-12 * ref.lr[i]) << "step " << i;
      else
        EXPECT_EQ(got[i].lr, double(float(ref.lr[i]))) << "step " << i;
      EXPECT_LT(std::fabs(got[i].loss - ref.loss[i]), 1e-4 * ref.loss[i])
          << "step " << i << ": mpc " << got[i].loss << " torch "
          << ref.loss[i];
    }
    std::vector<std::pair<std::string, Tensor>> params;
    std::string err;
    ASSERT_TRUE(readNpz(kModels + file + "_final.npz", params, err)) << err;
    ASSERT_EQ(params.size(), 4u);
    for (const auto &[name, want] : params)
      EXPECT_LT(test::relativeDifference(t.state(name), want), 2e-5) << name;
  }
}

/// `steps` steps of batches of 64 and, side by side, --grad-accum=2
/// windows of the same samples in 32s; `each(step, big, accumulated)`
/// after each, then `after(big, accumulated)`.
void trainBigAndAccumulated(
    CompileOptions o, int64_t steps,
    const std::function<void(int64_t, const StepRecord &, const StepRecord &)>
        &each,
    const std::function<void(const Trainer &, const Trainer &)> &after) {
  auto backend = createCpuBackend();
  o.gradAccum = 1;
  Trainer big(test::compileForBatch("mlp_seed.onnx", o, 64), *backend);
  o.gradAccum = 2;
  Trainer acc(test::compileForBatch("mlp_seed.onnx", o, 32), *backend);
  int64_t batch = 64;
  Dataset data =
      Dataset::fromNpz(kModels + "mlp_seed_data.npz", big.dataInputs(batch));
  for (int64_t s = 0; s < steps; ++s) {
    StepRecord b = big.step(data.batch(s, 64, false, 0));
    StepRecord a = acc.optimizerStep(
        {data.batch(2 * s, 32, false, 0), data.batch(2 * s + 1, 32, false, 0)});
    each(s, b, a);
  }
  after(big, acc);
}

} // namespace

TEST(LrScheduleParity, EveryScheduleTrainsAsTorchDoes) {
  for (const ScheduledRun &run : runs()) {
    auto backend = createCpuBackend();
    Trainer t(compileSeed(run.options), *backend);
    EXPECT_TRUE(t.hasLrSchedule()) << run.name;
  }
  expectRunsMatchTorch(runs(), "sched_");
}

// Biases in a group without weight decay (make_param_group_refs.py), alone
// and under a cosine schedule.
TEST(ParamGroupParity, NoWeightDecayOnBiasesTrainsAsTorchsGroups) {
  std::vector<ScheduledRun> r;
  CompileOptions o = fp32("adamw", 1e-2, "constant");
  o.weightDecay = 0.1;
  o.weightDecaySet = true;
  o.noWeightDecay = "bias";
  r.push_back({"adamw_bias", o});
  o.lrSchedule = "cosine";
  o.warmupSteps = 3;
  o.totalSteps = 30;
  r.push_back({"adamw_cosine", o});
  o = fp32("sgd", 0.05, "constant", 0.9);
  o.weightDecay = 1e-2;
  o.weightDecaySet = true;
  o.noWeightDecay = "bias";
  r.push_back({"sgd_bias", o});
  expectRunsMatchTorch(r, "groups_");
}

// Decaying the biases too trains elsewhere: the comparison above can fail.
TEST(ParamGroupParity, DecayingEveryParameterMissesTheGroupsReference) {
  CompileOptions o = fp32("adamw", 1e-2, "constant");
  o.weightDecay = 0.1;
  o.weightDecaySet = true;
  auto backend = createCpuBackend();
  Trainer t(compileSeed(o), *backend);
  train(t, 30);
  std::vector<std::pair<std::string, Tensor>> params;
  std::string err;
  ASSERT_TRUE(readNpz(kModels + "mlp_seed_ref_groups_adamw_bias_final.npz",
                      params, err))
      << err;
  for (const auto &[name, want] : params)
    if (name.find("bias") != std::string::npos) {
      EXPECT_GT(test::relativeDifference(t.state(name), want), 1e-4) << name;
    }
}

// Without the schedule the same optimizer trains elsewhere: the comparison
// above can fail.
TEST(LrScheduleParity, TheConstantRateMissesTheScheduledReference) {
  auto backend = createCpuBackend();
  Reference ref = readReference("mlp_seed_ref_sched_sgd_cosine.csv");
  Trainer t(compileSeed(fp32("sgd", 0.05, "constant", 0.9)), *backend);
  EXPECT_FALSE(t.hasLrSchedule());
  std::vector<StepRecord> got = train(t, 30);
  EXPECT_EQ(got[0].lr, double(0.05f));
  EXPECT_GT(std::fabs(got[29].loss - ref.loss[29]), 1e-2 * ref.loss[29]);
}

// Skipped steps hold the schedule: an fp16 run whose first steps overflow
// (init scale 2^24) starts its warmup at the first update applied, as
// transformers' Trainer holds its scheduler on a skipped optimizer step.
TEST(LrSchedule, StepsTheScalerSkipsDoNotAdvanceTheSchedule) {
  CompileOptions o = fp32("adam", 1e-2, "constant");
  o.precision = DType::F16;
  o.warmupSteps = 4;
  o.initScale = std::ldexp(1.0, 24);
  auto backend = createCpuBackend();
  Trainer t(compileSeed(o), *backend);
  std::vector<StepRecord> got = train(t, 16);
  int64_t applied = 0;
  int64_t skipped = 0;
  for (const StepRecord &r : got) {
    double want = applied < 4 ? 1e-2 * (double(applied) / 4.0) : 1e-2;
    EXPECT_EQ(r.lr, want) << "step " << r.step;
    applied += r.skipped ? 0 : 1;
    skipped += r.skipped ? 1 : 0;
  }
  EXPECT_GE(skipped, 3); // the test covers skipped steps
  EXPECT_GT(applied, 4); // and the end of the warmup
  EXPECT_EQ(t.state("optimizer_step").getAsDouble(0), double(applied));
}

// --grad-accum=2 of 32 samples follows the schedule of one step of 64: the
// rate advances once per window, and the losses agree.
TEST(LrSchedule, AccumulationAdvancesTheScheduleOncePerWindow) {
  CompileOptions o = fp32("adam", 1e-2, "cosine");
  o.warmupSteps = 2;
  o.totalSteps = 8;
  trainBigAndAccumulated(
      o, 10,
      [](int64_t s, const StepRecord &b, const StepRecord &a) {
        EXPECT_EQ(a.lr, b.lr) << "step " << s + 1;
        EXPECT_LT(std::fabs(a.loss - b.loss), 1e-5 * b.loss)
            << "step " << s + 1;
      },
      [](const Trainer &, const Trainer &acc) {
        EXPECT_EQ(acc.state("optimizer_step").getAsDouble(0), 10.0);
      });
}

// --ema-decay (passes/optimizer/ema.h): torch's AveragedModel with
// get_ema_multi_avg_fn after every optimizer step
// (models/make_ema_refs.py), for both of ATen's lerp formulas.
TEST(EmaParity, TheAverageIsTorchsAveragedModel) {
  struct Run {
    const char *name;
    CompileOptions options;
    double decay;
  };
  for (const Run &run :
       {Run{"adamw_0.9", fp32("adamw", 1e-2, "constant"), 0.9},
        Run{"sgd_0.25", fp32("sgd", 0.05, "constant", 0.9), 0.25}}) {
    SCOPED_TRACE(run.name);
    CompileOptions o = run.options;
    o.emaDecay = run.decay;
    auto backend = createCpuBackend();
    Trainer t(compileSeed(o), *backend);
    train(t, 30);
    std::vector<std::pair<std::string, Tensor>> want;
    std::string err;
    ASSERT_TRUE(
        readNpz(kModels + "mlp_seed_ref_ema_" + run.name + ".npz", want, err))
        << err;
    ASSERT_EQ(want.size(), 4u);
    EXPECT_EQ(t.state("ema_count").getAsDouble(0), 30.0);
    for (const auto &[name, tensor] : want) {
      EXPECT_LT(test::relativeDifference(t.state(name + "_ema"), tensor), 2e-5)
          << name;
      // The parameters themselves are elsewhere: the comparison can fail.
      EXPECT_GT(test::relativeDifference(t.state(name), tensor), 1e-3) << name;
    }
  }
}

// Overflow-skipped steps count (the loop calls update_parameters after
// every scaler.step); the first call copies the parameters, here the
// initial ones, a skipped step having left them as they were.
TEST(Ema, SkippedStepsAverageTheUnchangedParameters) {
  CompileOptions o = fp32("adam", 1e-2, "constant");
  o.precision = DType::F16;
  o.initScale = std::ldexp(1.0, 24);
  o.emaDecay = 0.5;
  auto backend = createCpuBackend();
  Trainer t(compileSeed(o), *backend);
  const Tensor initial = t.state("fc1.weight");
  std::vector<StepRecord> got = train(t, 1);
  ASSERT_TRUE(got[0].skipped);
  EXPECT_EQ(t.state("ema_count").getAsDouble(0), 1.0);
  EXPECT_EQ(t.state("fc1.weight_ema").bytes, initial.bytes);
}

// --grad-accum=2: one average per window, as one step of the whole batch.
TEST(Ema, AccumulationAveragesOncePerWindow) {
  CompileOptions o = fp32("adam", 1e-2, "constant");
  o.emaDecay = 0.75;
  trainBigAndAccumulated(
      o, 6, [](int64_t, const StepRecord &, const StepRecord &) {},
      [](const Trainer &big, const Trainer &acc) {
        EXPECT_EQ(acc.state("ema_count").getAsDouble(0), 6.0);
        for (const char *p : {"fc1.weight_ema", "fc2.bias_ema"})
          EXPECT_LT(test::relativeDifference(acc.state(p), big.state(p)), 1e-5)
              << p;
      });
}

// --optimizer=adafactor (passes/optimizer/adafactor.h): torch.optim.Adafactor's
// default, with weight decay under a cosine schedule, and with every knob
// turned (models/make_adafactor_refs.py).
TEST(AdafactorParity, TrainsAsTorchsAdafactor) {
  std::vector<ScheduledRun> r;
  CompileOptions o = fp32("adafactor", 1e-3, "constant");
  r.push_back({"default", o}); // lr not set: torch's 1e-2
  o = fp32("adafactor", 0.05, "cosine");
  o.lrSet = true;
  o.weightDecay = 0.01;
  o.weightDecaySet = true;
  o.warmupSteps = 3;
  o.totalSteps = 30;
  r.push_back({"wd_cosine", o});
  o = fp32("adafactor", 0.02, "constant");
  o.lrSet = true;
  o.beta2Decay = -0.5;
  o.epsilon = 1e-6;
  o.epsilonSet = true;
  o.eps2 = 1e-2;
  o.clipThreshold = 2;
  r.push_back({"tuned", o});
  expectRunsMatchTorch(r, "adafactor_");
}

// The point of Adafactor: the seed MLP's 2-D weights keep a row and a
// column factor, not Adam's two full moments.
TEST(Adafactor, KeepsFactorsNotMoments) {
  auto backend = createCpuBackend();
  Trainer t(compileSeed(fp32("adafactor", 1e-3, "constant")), *backend);
  EXPECT_EQ(t.state("fc1.weight_row_var").dims, (std::vector<int64_t>{20, 1}));
  EXPECT_EQ(t.state("fc1.weight_col_var").dims, (std::vector<int64_t>{1, 10}));
  EXPECT_EQ(t.state("fc1.bias_variance").dims, (std::vector<int64_t>{20}));
  EXPECT_EQ(*t.model().meta("mpc.optimizer_state"),
            "fc1.weight_row_var,fc1.weight_col_var,fc1.bias_variance,"
            "fc2.weight_row_var,fc2.weight_col_var,fc2.bias_variance");
}
