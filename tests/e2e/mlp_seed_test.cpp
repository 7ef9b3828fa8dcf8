// End to end: the seed's MLP compiled by the full pipeline and trained.
//
// fp32 runs are compared step by step with PyTorch's own trajectories
// (models/mlp_seed_ref_*.csv, made by models/make_mlp_seed.py); fp16 and bf16
// runs must follow fp32; a forced overflow must skip the step without
// touching any parameter; a resumed run must continue bit for bit.
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/data/npz.h"
#include "runtime/trainer.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace mpc;

namespace {

const std::string kModels = std::string(MPC_SOURCE_DIR) + "/models/";

std::unique_ptr<Model> compileSeed(const CompileOptions &options) {
  auto model = loadModel(kModels + "mlp_seed.onnx");
  Statistics stats;
  runPipeline(*model, defaultPipeline(), options, PipelineConfig{}, stats);
  return model;
}

CompileOptions fp32Options(const std::string &optimizer, double lr) {
  CompileOptions o;
  o.precision = DType::F32;
  o.optimizer = optimizer;
  o.lr = lr;
  return o;
}

/// Column `column` (0: step, 1: loss, 2: a clipped run's grad_norm) of a
/// reference CSV, one number per step.
std::vector<double> readReference(const std::string &name, int column = 1) {
  std::ifstream in(kModels + name);
  EXPECT_TRUE(in) << name;
  std::vector<double> values;
  std::string line;
  std::getline(in, line); // header
  while (std::getline(in, line)) {
    size_t at = 0;
    for (int c = 0; c < column && at != std::string::npos; ++c)
      at = line.find(',', at + (c ? 1 : 0));
    EXPECT_NE(at, std::string::npos) << name << ": no column " << column;
    if (at == std::string::npos)
      break;
    values.push_back(std::stod(line.substr(at + 1)));
  }
  return values;
}

struct TrainingRun {
  std::vector<StepRecord> steps;
  std::unique_ptr<Trainer> trainer;
};

TrainingRun train(std::unique_ptr<Model> model, Backend &backend,
                  int64_t steps) {
  TrainingRun run;
  run.trainer = std::make_unique<Trainer>(std::move(model), backend);
  int64_t batch = 0;
  auto specs = run.trainer->dataInputs(batch);
  Dataset data = Dataset::fromNpz(kModels + "mlp_seed_data.npz", specs);
  for (int64_t i = 0; i < steps; ++i)
    run.steps.push_back(run.trainer->step(
        data.batch(run.trainer->stepsDone(), batch, false, 0)));
  return run;
}

void expectMatchesPyTorch(const CompileOptions &options,
                          const std::string &reference, double tolerance) {
  auto backend = createCpuBackend();
  std::vector<double> ref = readReference(reference);
  ASSERT_EQ(ref.size(), 30u);
  // A run that clips records clip_grad_norm_'s return value per step.
  std::vector<double> norms;
  if (options.maxGradNorm > 0) {
    norms = readReference(reference, 2);
    ASSERT_EQ(norms.size(), 30u);
  }
  TrainingRun run = train(compileSeed(options), *backend, 30);
  for (size_t i = 0; i < ref.size(); ++i) {
    double rel = std::fabs(run.steps[i].loss - ref[i]) / std::fabs(ref[i]);
    EXPECT_LT(rel, tolerance) << reference << " step " << i << ": mpc "
                              << run.steps[i].loss << " torch " << ref[i];
    EXPECT_FALSE(run.steps[i].skipped);
    // The norm before clipping, not after (which would be max_norm).
    ASSERT_EQ(run.steps[i].gradNorm.has_value(), !norms.empty())
        << reference << " step " << i;
    if (!norms.empty())
      EXPECT_LT(std::fabs(*run.steps[i].gradNorm - norms[i]) / norms[i],
                tolerance)
          << reference << " step " << i << ": grad norm mpc "
          << *run.steps[i].gradNorm << " torch " << norms[i];
  }
}

std::vector<uint8_t> stateBytes(const Trainer &t, const std::string &name) {
  return t.state(name).bytes;
}

std::vector<std::string> paramNames(const Model &m) {
  return splitList(*m.meta("mpc.params"));
}

} // namespace

TEST(MlpSeedParity, SgdMomentumWeightDecayMatchesPyTorch) {
  CompileOptions o = fp32Options("sgd", 0.05);
  o.momentum = 0.9;
  o.weightDecay = 1e-4;
  o.weightDecaySet = true;
  expectMatchesPyTorch(o, "mlp_seed_ref_sgd.csv", 1e-4);
}

TEST(MlpSeedParity, SgdNesterovMatchesPyTorch) {
  CompileOptions o = fp32Options("sgd", 0.05);
  o.momentum = 0.9;
  o.nesterov = true;
  expectMatchesPyTorch(o, "mlp_seed_ref_sgd_nesterov.csv", 1e-4);
}

TEST(MlpSeedParity, AdamMatchesPyTorch) {
  expectMatchesPyTorch(fp32Options("adam", 1e-3), "mlp_seed_ref_adam.csv",
                       1e-4);
}

TEST(MlpSeedParity, AdamWMatchesPyTorch) {
  CompileOptions o = fp32Options("adamw", 1e-3);
  o.weightDecay = 0.01;
  o.weightDecaySet = true;
  expectMatchesPyTorch(o, "mlp_seed_ref_adamw.csv", 1e-4);
}

TEST(MlpSeedParity, AdamWithGradClippingMatchesPyTorch) {
  CompileOptions o = fp32Options("adam", 1e-2);
  o.maxGradNorm = 0.1;
  expectMatchesPyTorch(o, "mlp_seed_ref_adam_clip.csv", 1e-4);
}

TEST(MlpSeedParity, AdamFinalWeightsMatchPyTorch) {
  auto backend = createCpuBackend();
  TrainingRun run = train(compileSeed(fp32Options("adam", 1e-3)), *backend, 30);
  std::vector<std::pair<std::string, Tensor>> ref;
  std::string err;
  ASSERT_TRUE(readNpz(kModels + "mlp_seed_ref_adam_final.npz", ref, err))
      << err;
  ASSERT_EQ(ref.size(), 4u);
  for (const auto &kv : ref) {
    const Tensor &mine = run.trainer->state(kv.first);
    ASSERT_EQ(mine.dims, kv.second.dims) << kv.first;
    for (int64_t i = 0; i < mine.numel(); ++i)
      EXPECT_NEAR(mine.getAsDouble(i), kv.second.getAsDouble(i), 1e-5)
          << kv.first << "[" << i << "]";
  }
}

// fp16 and bf16 follow the fp32 trajectory: same data, same initial weights,
// Adam; the mixed-precision loss stays within 1% (fp16) / 3% (bf16) of the
// fp32 loss at every one of 100 steps, and the loss falls.
TEST(MlpSeedMixedPrecision, Fp16AndBf16FollowFp32) {
  auto backend = createCpuBackend();
  CompileOptions o32 = fp32Options("adam", 1e-2);
  TrainingRun ref = train(compileSeed(o32), *backend, 100);
  for (DType t : {DType::F16, DType::BF16}) {
    CompileOptions o = o32;
    o.precision = t;
    TrainingRun run = train(compileSeed(o), *backend, 100);
    double tolerance = t == DType::F16 ? 0.01 : 0.03;
    for (size_t i = 0; i < ref.steps.size(); ++i) {
      double rel =
          std::fabs(run.steps[i].loss - ref.steps[i].loss) / ref.steps[i].loss;
      EXPECT_LT(rel, tolerance) << dtypeName(t) << " step " << i;
    }
    EXPECT_LT(run.steps.back().loss, 0.5 * run.steps.front().loss)
        << dtypeName(t);
  }
}

TEST(MlpSeedMixedPrecision, Fp16UsesDynamicScalingWithGradScalerDefaults) {
  auto backend = createCpuBackend();
  CompileOptions o = fp32Options("adam", 1e-2);
  o.precision = DType::F16;
  TrainingRun run = train(compileSeed(o), *backend, 5);
  for (const StepRecord &r : run.steps) {
    EXPECT_EQ(r.lossScale, 65536.0);
    EXPECT_FALSE(r.skipped);
  }
}

// A scale so large that fp16 gradients overflow: the step is skipped, every
// parameter and optimizer moment stays bit-identical, the scale halves, and
// after a few halvings training proceeds and the loss falls.
TEST(MlpSeedOverflow, HugeScaleSkipsHalvesAndRecovers) {
  auto backend = createCpuBackend();
  CompileOptions o = fp32Options("adam", 1e-2);
  o.precision = DType::F16;
  o.initScale = std::ldexp(1.0, 40);
  TrainingRun run = train(compileSeed(o), *backend, 0);
  Trainer &t = *run.trainer;
  const Model &m = t.model();
  std::vector<std::string> state;
  for (const Value *init : m.training->algorithm->initializers())
    if (init->isState && init->name() != *m.meta("mpc.loss_scale") &&
        init->name() != *m.meta("mpc.growth_tracker"))
      state.push_back(init->name());
  ASSERT_GT(state.size(), 8u); // 4 params, 8 moments, step counter
  std::map<std::string, std::vector<uint8_t>> before;
  for (const auto &s : state)
    before[s] = stateBytes(t, s);

  int64_t batch = 0;
  auto specs = t.dataInputs(batch);
  Dataset data = Dataset::fromNpz(kModels + "mlp_seed_data.npz", specs);
  StepRecord first = t.step(data.batch(0, batch, false, 0));
  EXPECT_TRUE(first.skipped);
  EXPECT_EQ(first.lossScale, std::ldexp(1.0, 40));
  for (const auto &s : state)
    EXPECT_EQ(stateBytes(t, s), before[s]) << s << " changed on a skipped step";
  EXPECT_EQ(t.state(*m.meta("mpc.loss_scale")).getAsDouble(0),
            std::ldexp(1.0, 39));
  EXPECT_EQ(t.state(*m.meta("mpc.growth_tracker")).getAsDouble(0), 0);

  std::vector<StepRecord> rest;
  for (int i = 1; i < 120; ++i)
    rest.push_back(t.step(data.batch(t.stepsDone(), batch, false, 0)));
  int64_t skipped = first.skipped;
  for (const StepRecord &r : rest)
    skipped += r.skipped;
  EXPECT_GT(skipped, 3);
  EXPECT_LT(skipped, 40);
  EXPECT_FALSE(rest.back().skipped);
  EXPECT_LT(rest.back().loss, 0.6 * first.loss);
}

// An inf injected into the batch (bypassing the data checks) is an overflow
// like any other: skipped, nothing changes.
TEST(MlpSeedOverflow, InjectedInfSkipsTheStep) {
  auto backend = createCpuBackend();
  CompileOptions o = fp32Options("sgd", 0.05);
  o.precision = DType::F16;
  o.momentum = 0.9;
  TrainingRun run = train(compileSeed(o), *backend, 2);
  Trainer &t = *run.trainer;
  int64_t batch = 0;
  auto specs = t.dataInputs(batch);
  Dataset data = Dataset::fromNpz(kModels + "mlp_seed_data.npz", specs);
  auto b = data.batch(t.stepsDone(), batch, false, 0);
  b[0].second.data<float>()[3] = INFINITY;
  auto params = paramNames(t.model());
  std::vector<std::vector<uint8_t>> before;
  for (const auto &p : params)
    before.push_back(stateBytes(t, p));
  double scale = t.state(*t.model().meta("mpc.loss_scale")).getAsDouble(0);
  StepRecord r = t.step(b);
  EXPECT_TRUE(r.skipped);
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(stateBytes(t, params[i]), before[i]) << params[i];
  EXPECT_EQ(t.state(*t.model().meta("mpc.loss_scale")).getAsDouble(0),
            scale / 2);
  StepRecord next = t.step(data.batch(t.stepsDone(), batch, false, 0));
  EXPECT_FALSE(next.skipped);
}

// 20 steps straight equal 10 steps, a checkpoint, and 10 resumed steps, bit
// for bit (losses and every state tensor).
TEST(MlpSeedCheckpoint, ResumeContinuesBitForBit) {
  auto backend = createCpuBackend();
  CompileOptions o = fp32Options("adam", 1e-2);
  o.precision = DType::F16;
  TrainingRun straight = train(compileSeed(o), *backend, 20);

  TrainingRun first = train(compileSeed(o), *backend, 10);
  std::string ckpt = testing::TempDir() + "/mlp_seed_resume.onnx";
  first.trainer->saveCheckpoint(ckpt);

  auto resumed = std::make_unique<Trainer>(compileSeed(o), *backend);
  resumed->resumeFrom(ckpt);
  EXPECT_EQ(resumed->stepsDone(), 10);
  int64_t batch = 0;
  auto specs = resumed->dataInputs(batch);
  Dataset data = Dataset::fromNpz(kModels + "mlp_seed_data.npz", specs);
  for (int i = 10; i < 20; ++i) {
    StepRecord r =
        resumed->step(data.batch(resumed->stepsDone(), batch, false, 0));
    EXPECT_EQ(r.step, straight.steps[size_t(i)].step);
    EXPECT_EQ(r.loss, straight.steps[size_t(i)].loss) << "step " << i + 1;
    EXPECT_EQ(r.lossScale, straight.steps[size_t(i)].lossScale);
  }
  for (const Value *init : resumed->model().training->algorithm->initializers())
    if (init->isState) {
      EXPECT_EQ(stateBytes(*resumed, init->name()),
                stateBytes(*straight.trainer, init->name()))
          << init->name();
    }
}

TEST(MlpSeedCheckpoint, CheckpointOfAnotherModelIsRefused) {
  auto backend = createCpuBackend();
  TrainingRun sgd = train(compileSeed(fp32Options("sgd", 0.1)), *backend, 1);
  std::string ckpt = testing::TempDir() + "/mlp_seed_sgd.onnx";
  sgd.trainer->saveCheckpoint(ckpt);
  Trainer adam(compileSeed(fp32Options("adam", 1e-3)), *backend);
  try {
    adam.resumeFrom(ckpt);
    FAIL() << "resume from a different model's checkpoint was accepted";
  } catch (const mpc::Error &e) {
    EXPECT_NE(std::string(e.what()).find("does not match the model"),
              std::string::npos)
        << e.what();
  }
}
