// End to end: gradient accumulation (--grad-accum=K,
// passes/optimizer/grad_accum.h).
//
// K micro-batches of B samples must train exactly like one step on the K*B
// batch made of the same samples (fp32, to rounding): same parameters after
// 1 and 3 optimizer steps, same logged loss; on the seed MLP and on the
// transformer block (LayerNorm, no batch statistics, no dropout), with SGD
// (momentum) and Adam, unscaled and with dynamic loss scaling. An overflow in
// one micro-batch skips the whole window: no parameter, moment or step
// counter changes, the scale backs off once, the buffers start over.
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/trainer.h"
#include "support/diagnostics.h"
#include "tests/e2e/batch_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

using namespace mpc;
using test::bytesOf;
using test::compileForBatch;
using test::fp32Options;
using test::relativeDifference;

namespace {

const std::string &kModels = test::modelsDir();

using Params = std::map<std::string, Tensor>;

struct Run {
  std::vector<StepRecord> steps;
  std::vector<Params> params; ///< after each optimizer step
};

/// `steps` optimizer steps of trainer.microBatches() micro-batches of
/// `batch` samples; micro-batch j of step s is batch s*K + j, as mpc-run
/// takes them.
Run train(std::unique_ptr<Model> model, const std::string &dataFile,
          int64_t batch, int64_t steps) {
  auto backend = createCpuBackend();
  std::vector<std::string> names = splitList(*model->meta("mpc.params"));
  Trainer t(std::move(model), *backend);
  int64_t unused = batch;
  Dataset data = Dataset::fromNpz(kModels + dataFile, t.dataInputs(unused));
  Run run;
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<Trainer::Batch> micro;
    for (int64_t j = 0; j < t.microBatches(); ++j)
      micro.push_back(data.batch(s * t.microBatches() + j, batch, false, 0));
    run.steps.push_back(t.optimizerStep(micro));
    Params p;
    for (const std::string &n : names)
      p[n] = t.state(n);
    run.params.push_back(std::move(p));
  }
  return run;
}

/// K micro-batches of B equal one step on K*B: parameters after optimizer
/// steps 1 and 3 and every logged loss, to fp32 rounding.
/// `noise` names a parameter whose gradient is zero but for rounding (its
/// update is rounding noise, which Adam normalises to lr-sized steps).
void expectAccumulationMatchesBigBatch(const std::string &file,
                                       const std::string &dataFile,
                                       CompileOptions o, int64_t k,
                                       int64_t microBatch,
                                       const std::string &noise = "") {
  const int64_t steps = 3;
  o.gradAccum = 1;
  Run big = train(compileForBatch(file, o, k * microBatch), dataFile,
                  k * microBatch, steps);
  o.gradAccum = k;
  Run acc =
      train(compileForBatch(file, o, microBatch), dataFile, microBatch, steps);
  for (int64_t s = 0; s < steps; ++s) {
    const StepRecord &a = acc.steps[size_t(s)], &b = big.steps[size_t(s)];
    EXPECT_EQ(a.step, s + 1);
    EXPECT_FALSE(a.skipped) << "step " << s + 1;
    EXPECT_EQ(a.lossScale, b.lossScale) << "step " << s + 1;
    EXPECT_LT(std::fabs(a.loss - b.loss), 1e-5 * std::fabs(b.loss))
        << file << " step " << s + 1 << ": " << a.loss << " vs " << b.loss;
    // With clipping, the window's norm is the big batch's (the norm of the
    // K-th micro-batch's sums, not of a partial sum).
    ASSERT_EQ(a.gradNorm.has_value(), o.maxGradNorm > 0) << "step " << s + 1;
    ASSERT_EQ(b.gradNorm.has_value(), o.maxGradNorm > 0) << "step " << s + 1;
    if (a.gradNorm)
      EXPECT_LT(std::fabs(*a.gradNorm - *b.gradNorm), 1e-5 * *b.gradNorm)
          << file << " step " << s + 1 << ": grad norm " << *a.gradNorm
          << " vs " << *b.gradNorm;
  }
  for (int64_t s : {0, 2})
    for (const auto &[name, want] : big.params[size_t(s)]) {
      if (name == noise)
        continue;
      const Tensor &got = acc.params[size_t(s)].at(name);
      EXPECT_LT(relativeDifference(got, want), 1e-5)
          << file << " " << o.optimizer << " '" << name << "' after step "
          << s + 1;
    }
  // The runs moved: equality is not that of two untouched models.
  for (const auto &[name, first] : big.params[0]) {
    if (name == noise)
      continue;
    EXPECT_GT(relativeDifference(big.params[2].at(name), first), 1e-6) << name;
  }
}

} // namespace

TEST(GradAccum, MlpSgdMatchesTheBigBatch) {
  expectAccumulationMatchesBigBatch("mlp_seed.onnx", "mlp_seed_data.npz",
                                    fp32Options("sgd", 4), 4, 16);
}

TEST(GradAccum, MlpAdamMatchesTheBigBatch) {
  expectAccumulationMatchesBigBatch("mlp_seed.onnx", "mlp_seed_data.npz",
                                    fp32Options("adam", 4), 4, 16);
}

TEST(GradAccum, MlpSgdWithDynamicLossScaleMatchesTheBigBatch) {
  // The scaled path: seed = scale / K, sums unscaled together at the end.
  // (SGD, not Adam: Adam's first steps would hide a seed off by a factor.)
  CompileOptions o = fp32Options("sgd", 4);
  o.lossScale = "dynamic";
  expectAccumulationMatchesBigBatch("mlp_seed.onnx", "mlp_seed_data.npz", o, 4,
                                    16);
}

TEST(GradAccum, MlpSgdWithClippingMatchesTheBigBatch) {
  // The clip runs on every micro-batch's partial sums; only the K-th
  // run's clips what the update reads. At 0.3 the big batch's gradient is
  // clipped (its norm is about 0.4), so a clip of anything else parts.
  CompileOptions o = fp32Options("sgd", 4);
  o.maxGradNorm = 0.3;
  o.lossScale = "dynamic";
  expectAccumulationMatchesBigBatch("mlp_seed.onnx", "mlp_seed_data.npz", o, 4,
                                    16);
}

// The attention's key bias adds q.b to every score of a query's row, which
// softmax ignores: its gradient is rounding noise.
const char *kKeyBias = "attn.k.bias";

TEST(GradAccum, TransformerSgdMatchesTheBigBatch) {
  expectAccumulationMatchesBigBatch("transformer_dynbatch.onnx",
                                    "transformer_data.npz",
                                    fp32Options("sgd", 4), 4, 1, kKeyBias);
}

TEST(GradAccum, TransformerAdamMatchesTheBigBatch) {
  expectAccumulationMatchesBigBatch("transformer_dynbatch.onnx",
                                    "transformer_data.npz",
                                    fp32Options("adam", 4), 4, 1, kKeyBias);
}

TEST(GradAccum, OverflowInOneMicroBatchSkipsTheWholeWindow) {
  CompileOptions o = fp32Options("adam", 4);
  o.precision = DType::F16; // dynamic loss scaling, 65536
  o.lr = 1e-2;
  auto backend = createCpuBackend();
  auto model = loadModel(kModels + "mlp_seed.onnx");
  Statistics stats;
  runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
  Trainer t(std::move(model), *backend);
  int64_t batch = 0;
  Dataset data =
      Dataset::fromNpz(kModels + "mlp_seed_data.npz", t.dataInputs(batch));
  auto window = [&](int64_t s) {
    std::vector<Trainer::Batch> micro;
    for (int64_t j = 0; j < 4; ++j)
      micro.push_back(data.batch(s * 4 + j, batch, false, 0));
    return micro;
  };
  const Model &m = t.model();
  std::vector<std::string> untouched =
      splitList(*m.meta("mpc.params") + "," + *m.meta("mpc.optimizer_state") +
                "," + *m.meta("mpc.step"));
  std::vector<std::string> buffers =
      splitList(*m.meta("mpc.grad_accum_buffers"));
  const std::string scale = *m.meta("mpc.loss_scale"),
                    tracker = *m.meta("mpc.growth_tracker"),
                    counter = *m.meta("mpc.grad_accum_counter");
  ASSERT_EQ(buffers.size(), 4u);

  // A clean window first, so moments and the step counter are not zeros.
  StepRecord first = t.optimizerStep(window(0));
  ASSERT_FALSE(first.skipped);
  EXPECT_EQ(t.state(tracker).getAsDouble(0), 1); // counted once per window
  std::map<std::string, std::vector<uint8_t>> before;
  for (const std::string &n : untouched)
    before[n] = bytesOf(t.state(n));

  // Micro-batch 2 of 4 (not the boundary) overflows fp16 in the forward.
  std::vector<Trainer::Batch> bad = window(1);
  bad[1][0].second.data<float>()[0] = 1e6f;
  StepRecord r = t.optimizerStep(bad);
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(r.step, 2);
  EXPECT_EQ(r.lossScale, 65536);
  for (const std::string &n : untouched)
    EXPECT_EQ(bytesOf(t.state(n)), before[n])
        << "'" << n << "' changed in a skipped window";
  EXPECT_EQ(t.state(scale).getAsDouble(0), 32768); // backed off once
  EXPECT_EQ(t.state(tracker).getAsDouble(0), 0);
  EXPECT_EQ(t.state(counter).getAsDouble(0), 0);
  for (const std::string &b : buffers)
    for (float v : t.state(b).toFloats())
      ASSERT_EQ(v, 0.0f) << "'" << b << "' not reset after the window";

  // The next window is clean again and updates at the new scale.
  StepRecord next = t.optimizerStep(window(2));
  EXPECT_FALSE(next.skipped);
  EXPECT_EQ(next.lossScale, 32768);
  EXPECT_EQ(t.state(scale).getAsDouble(0), 32768);
  EXPECT_EQ(t.state(tracker).getAsDouble(0), 1);
  EXPECT_EQ(t.stepsDone(), 3);
  EXPECT_NE(bytesOf(t.state(untouched[0])), before[untouched[0]]);
}

TEST(GradAccum, InsideAWindowTheScaleAndParametersHold) {
  // One micro-batch at a time: nothing but the buffers and the counter moves
  // until the K-th; then stepsDone() counts one optimizer step.
  auto backend = createCpuBackend();
  CompileOptions o = fp32Options("sgd", 3);
  o.precision = DType::F16;
  auto model = loadModel(kModels + "mlp_seed.onnx");
  Statistics stats;
  runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
  Trainer t(std::move(model), *backend);
  int64_t batch = 0;
  Dataset data =
      Dataset::fromNpz(kModels + "mlp_seed_data.npz", t.dataInputs(batch));
  const std::string p = "fc1.weight", counter = "grad_accum_step";
  const std::vector<uint8_t> p0 = bytesOf(t.state(p));
  for (int64_t j = 0; j < 2; ++j) {
    t.step(data.batch(j, batch, false, 0));
    EXPECT_EQ(t.state(counter).getAsDouble(0), double(j + 1));
    EXPECT_EQ(t.stepsDone(), 0);
    EXPECT_EQ(bytesOf(t.state(p)), p0);
    EXPECT_EQ(t.lossScale(), 65536);
  }
  // A checkpoint now would lose the window's buffers' meaning: refused.
  EXPECT_THROW(t.saveCheckpoint(::testing::TempDir() + "/mid_window.onnx"),
               Error);
  std::vector<Trainer::Batch> wrongCount = {data.batch(0, batch, false, 0)};
  EXPECT_THROW(t.optimizerStep(wrongCount), Error);
  t.step(data.batch(2, batch, false, 0));
  EXPECT_EQ(t.stepsDone(), 1);
  EXPECT_EQ(t.state(counter).getAsDouble(0), 0);
  EXPECT_NE(bytesOf(t.state(p)), p0);
}
